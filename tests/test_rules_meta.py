"""Every rule: registered, documented, and its own examples behave (the bad one fires, the good
one does not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sits_doctor import CheckOptions, check
from sits_doctor.rule import DOC_SECTIONS, doc_sections
from sits_doctor.rules import RULES

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
BLOCK = re.compile(r"```(\w+)([^\n]*)\n(.*?)```", re.DOTALL)


def test_registry_lists_every_rule_module_sorted():
    files = sorted(p.stem for p in RULES_DIR.glob("sits*.py"))
    registered = [m.__name__.rsplit(".", 1)[-1] for m in RULES]
    assert registered == files
    codes = [m.RULE.code for m in RULES]
    assert codes == sorted(codes)


def test_codes_and_names_unique_and_well_formed():
    codes = [m.RULE.code for m in RULES]
    names = [m.RULE.name for m in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for m in RULES:
        assert re.fullmatch(r"SITS\d{3}", m.RULE.code)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", m.RULE.name)
        stem = m.__name__.rsplit(".", 1)[-1]
        assert stem == f"{m.RULE.code.lower()}_{m.RULE.name.replace('-', '_')}"


@pytest.mark.parametrize("module", RULES, ids=lambda m: m.RULE.code)
def test_docs_have_every_section(module):
    doc = module.__doc__ or ""
    assert doc.splitlines()[0] == f"{module.RULE.name} ({module.RULE.code})"
    sections = doc_sections(module)
    for name in DOC_SECTIONS:
        assert sections.get(name), f"{module.RULE.code}: section '{name}' missing or empty"
    assert "Use instead:" in sections["Example"]
    assert re.search(r"(@|§)", sections["Sources"]), "Sources must cite a file@version or a research section"


def _materialize(example: str, root: Path, part: str, gpus: list[str] | None = None) -> list[str]:
    """Write the example's blocks for ``part`` ("bad" or "good"); return its --target specs (and
    add its ``gpu=`` to ``gpus``)."""
    bad_text, _, good_text = example.partition("Use instead:")
    targets: list[str] = []
    for text, which in ((bad_text, "bad"), (good_text, "good")):
        for lang, info, body in BLOCK.findall(text):
            attrs = dict(a.split("=", 1) for a in info.split() if "=" in a)
            if which != part and "context" not in info.split():
                continue
            if "file" not in attrs:
                continue
            path = root / attrs["file"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
            if which == part and "target" in attrs:
                targets.append(attrs["target"])
            if which == part and "gpu" in attrs and gpus is not None:
                gpus.append(attrs["gpu"])
    return targets


@pytest.mark.parametrize("module", RULES, ids=lambda m: m.RULE.code)
def test_examples_bad_fires_good_does_not(module, tmp_path, monkeypatch):
    example = doc_sections(module)["Example"]
    code = module.RULE.code
    for part in ("bad", "good"):
        root = tmp_path / part
        root.mkdir()
        gpus: list[str] = []
        targets = _materialize(example, root, part, gpus)
        monkeypatch.chdir(root)
        report = check(["."], CheckOptions(targets=targets, isolated=True, select=[code], gpu=gpus[0] if gpus else None))
        assert not report.errors, [str(e) for e in report.errors]
        fired = [f for f in report.findings if f.code == code and f.severity.value != "info"]
        if part == "bad":
            assert fired, f"{code}: the bad example does not fire"
        else:
            assert not fired, f"{code}: the good example fires: {[f.render() for f in fired]}"
