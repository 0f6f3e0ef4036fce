"""SARIF 2.1.0 for GitHub code scanning (shared/research/linter-anchors.md §3).

Rule metadata with help text from each rule's docs; repository-relative URIs under
``%SRCROOT%``; regions from line 1; ``partialFingerprints`` from rule + path + JSON Pointer, and for
an option among a command's words the command's pointer and the option's words (never line
numbers or word indexes, so alerts survive edits elsewhere in the file); ``security-severity`` as a string
for SITS3xx rules; input errors as tool execution notifications.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from sits_doctor import __version__
from sits_doctor.engine import Report, rule_modules
from sits_doctor.rule import doc_sections

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SECURITY_SEVERITY = {"error": "8.0", "warning": "5.0", "info": "2.0"}


def repo_root(start: Path | None = None) -> Path:
    """The enclosing git work tree, else the working directory."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def artifact(file: str, root: Path) -> dict:
    """An artifactLocation: relative to the repository root, or an absolute file URI outside it."""
    from urllib.parse import quote

    path = Path(file).resolve()
    try:  # URIs carry a file name's bytes percent-encoded, whatever their encoding
        return {"uri": quote(os.fsencode(path.relative_to(root).as_posix())), "uriBaseId": "%SRCROOT%"}
    except ValueError:
        return {"uri": "file://" + quote(os.fsencode(path.as_posix()))}


def render(report: Report) -> str:
    root = repo_root()
    modules = rule_modules()
    index = {m.RULE.code: i for i, m in enumerate(modules)}
    rules = []
    for m in modules:
        r = m.RULE
        sections = doc_sections(m)
        what = " ".join(sections.get("What it does", r.summary).split())
        descriptor = {
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": what[:1024]},
            "help": {"text": (m.__doc__ or r.summary).strip(), "markdown": (m.__doc__ or r.summary).strip()},
            "defaultConfiguration": {"level": LEVEL[r.severity.value]},
            "properties": {"tags": ["llm-deployment", *r.frameworks], "precision": "high"},
        }
        if r.code.startswith("SITS3"):
            descriptor["properties"]["security-severity"] = SECURITY_SEVERITY[r.severity.value]
        rules.append(descriptor)

    seen: Counter[str] = Counter()
    results = []
    for f in report.findings:
        location = artifact(f.location.file, root)
        uri = location["uri"]
        pointer, words = f.identity()
        key = f"{f.code}\0{uri}\0{f.location.doc_index}\0{pointer}" + (f"\0{words}" if words else "")
        base = hashlib.sha256(key.encode()).hexdigest()[:32]
        seen[base] += 1
        text = "\n".join([f.message, *f.explanation()]) + (f"\nhelp: {f.fix_hint}" if f.fix_hint else "")
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": LEVEL[f.severity.value],
            "message": {"text": text},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": {"startLine": max(1, f.location.line), "startColumn": max(1, f.location.col)},
                },
                "logicalLocations": [{"fullyQualifiedName": f.location.pointer or "/", "kind": "member"}],
            }],
            "partialFingerprints": {"primaryLocationLineHash": f"{base}:{seen[base]}"},
            "properties": {"evidence": list(f.evidence), "deployment": f.plan},
        }
        if f.code.startswith("SITS3"):
            result["properties"]["security-severity"] = SECURITY_SEVERITY[f.severity.value]
        results.append(result)

    notifications = []
    for e in report.errors:
        note = {"level": "error", "message": {"text": e.message}, "descriptor": {"id": "input-error"}}
        if e.path and not e.path.startswith("<"):
            region = {"startLine": e.line or 1, "startColumn": e.col or 1}
            note["locations"] = [{"physicalLocation": {
                "artifactLocation": artifact(e.path, root),
                "region": region,
            }}]
        notifications.append(note)
    for e in report.internal_errors:
        notifications.append({"level": "error", "message": {"text": e}, "descriptor": {"id": "internal-error"}})

    sarif = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "sits-doctor",
                "semanticVersion": __version__,
                "version": __version__,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": not (report.internal_errors or report.errors),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    }
    from sits_doctor.reporters import printable

    return json.dumps(printable(sarif), indent=2, ensure_ascii=False)
