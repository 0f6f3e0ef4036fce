"""What TensorRT-LLM's LLM-API options (``trtllm-serve --extra_llm_api_options FILE`` / ``--config``)
accept, per release, read from the release's own ``tensorrt_llm/llmapi/llm_args.py``.

The YAML keys are the fields of pydantic models: ``TorchLlmArgs`` (PyTorch backend, the default in
1.x), ``TrtLlmArgs`` (TensorRT engine backend), their base ``BaseLlmArgs``, and the config classes
their fields hold (``KvCacheConfig``, ``CudaGraphConfig``, ``SchedulerConfig``, ``MoeConfig``,
``TorchCompileConfig``, the speculative-decoding configs, ...). This tool parses the module with
Python's ``ast`` (no TensorRT-LLM import, no GPU): class bases, annotated fields, ``Field(default=...,
default_factory=..., alias=..., deprecated=..., status=...)``, ``model_config`` / ``class Config``
``extra`` (``StrictBaseModel`` forbids extra keys; pydantic's own default is ``ignore``), with
fields and the extra policy inherited from base classes. Private attributes (``_x``,
``PrivateAttr``) and ``ClassVar`` are not options and are left out.

Input: ``ROOT/<version>/`` for each release, holding one of

- ``tensorrt_llm/llmapi/llm_args.py`` (a source checkout at tag ``v<version>``, or an unpacked wheel),
- ``llm_args.py`` (the module alone, or an excerpt of its class and field declarations),
- ``llm_args.html``: the release docs' Sphinx "viewcode" page of the module
  (``https://nvidia.github.io/TensorRT-LLM/<version>/_modules/tensorrt_llm/llmapi/llm_args.html``,
  stored in the repo's gh-pages branch as ``<version>/_modules/...``); its highlighted source is
  turned back into Python here.

Output (JSON on stdout; committed as ``sits_doctor/frameworks/data/trtllm_options.json``)::

    {"generator": "tools/gen_trtllm_options.py", "releases": [...], "how": {"1.0.0": "ast", ...},
     "sources": {"1.0.0": "<what was read>"},
     "classes": {"KvCacheConfig": [{"first": "1.0.0", "last": "1.0.0", "extra": "forbid",
                                    "fields": {"dtype": {"type": "str", "default": "auto", ...}}}]},
     "roots": {"pytorch": [{"first": ..., "last": ..., "class": "TorchLlmArgs"}], "tensorrt": [...]},
     "field_class": {"BaseLlmArgs.kv_cache_config": "KvCacheConfig", ...}}

A field is ``{"type", "default", "alias", "deprecated"}`` plus ``"default_factory"`` (the
factory's name) or ``"required": true`` where they apply, ``"status"`` (TensorRT-LLM's
prototype/beta/deprecated marker) where set, and ``"validation_alias"`` (every name accepted on
input, from ``validation_alias=AliasChoices(...)``; e.g. 1.2.0's ``speculative_model`` also
takes ``speculative_model_dir``) where set. A default that is not a literal (an enum member, a
call) is kept as its source text. Segments (first/last inclusive, from ``releases``) merge
identical consecutive releases; a class missing from a release ends its segment. ``field_class``
values are a class name, or segments when the class a field holds changes between releases.

    python tools/gen_trtllm_options.py ROOT > sits_doctor/frameworks/data/trtllm_options.json
    python tools/gen_trtllm_options.py ROOT --note "1.0.0=transcribed excerpt of the viewcode page"

``--note VERSION=TEXT`` records in ``sources`` how a release's input was obtained, and
``--missing VERSION=REASON`` lists in ``missing`` a release that was wanted but not read.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import re
import sys
from pathlib import Path
from typing import Any

from packaging.version import Version

ROOTS = {"pytorch": "TorchLlmArgs", "tensorrt": "TrtLlmArgs"}
PYDANTIC_BASES = {"BaseModel": "ignore", "StrictBaseModel": "forbid"}
NOT_OPTIONS = {"ClassVar"}
MISSING = object()


# --------------------------------------------------------------------------------------------
# Reading a release
# --------------------------------------------------------------------------------------------
def viewcode_to_python(page: str) -> str:
    """The Python source inside a Sphinx viewcode page (``<div class="highlight"><pre>...</pre>``)."""
    start = page.index('<div class="highlight"><pre>') + len('<div class="highlight"><pre>')
    end = page.index("</pre>", start)
    body = re.sub(r'<div class="viewcode-block"[^>]*>\s*<a class="viewcode-back"[^>]*>\[docs\]</a>\n?', "",
                  page[start:end])
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def read_release(folder: Path) -> tuple[str, str]:
    """(source text, description of what was read) for one release folder."""
    for rel in ("tensorrt_llm/llmapi/llm_args.py", "llm_args.py"):
        if (folder / rel).is_file():
            return (folder / rel).read_text(encoding="utf-8"), rel
    if (folder / "llm_args.html").is_file():
        return viewcode_to_python((folder / "llm_args.html").read_text(encoding="utf-8")), "llm_args.html (viewcode)"
    raise FileNotFoundError(f"{folder}: no tensorrt_llm/llmapi/llm_args.py, llm_args.py or llm_args.html")


# --------------------------------------------------------------------------------------------
# The AST reading
# --------------------------------------------------------------------------------------------
def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    if isinstance(node, ast.Call):
        return _name(node.func)
    return ""


def _value(node: ast.AST) -> Any:
    """A literal as JSON, else its source text."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.BinOp):  # 1024**3 and the like
            try:
                return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307
            except Exception:  # noqa: BLE001
                pass
        return ast.unparse(node)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def _extra_of(body: list[ast.stmt]) -> str | None:
    """The extra policy a class body sets itself (model_config = {...} / ConfigDict(...) / class Config)."""
    for stmt in body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == "model_config" for t in targets) and stmt.value is not None:
                v = stmt.value
                if isinstance(v, ast.Dict):
                    for k, val in zip(v.keys, v.values):
                        if isinstance(k, ast.Constant) and k.value == "extra":
                            return str(_value(val))
                if isinstance(v, ast.Call):
                    for kw in v.keywords:
                        if kw.arg == "extra":
                            return str(_value(kw.value))
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            for s in stmt.body:
                if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "extra" for t in s.targets):
                    return str(_value(s.value))
    return None


def _field(stmt: ast.AnnAssign) -> dict | None:
    """One annotated class attribute as an option, or None when it is not one."""
    name = stmt.target.id
    if name.startswith("_") or _name(stmt.annotation) in NOT_OPTIONS:
        return None
    out: dict[str, Any] = {"type": ast.unparse(stmt.annotation), "default": None, "alias": None, "deprecated": False}
    value = stmt.value
    if value is None:
        out["required"] = True
        return out
    if isinstance(value, ast.Call) and _name(value.func) == "PrivateAttr":
        return None
    if isinstance(value, ast.Call) and _name(value.func) in ("Field", "PydanticField"):
        default = value.args[0] if value.args else MISSING
        kw = {k.arg: k.value for k in value.keywords if k.arg}
        default = kw.get("default", default)
        if "default_factory" in kw:
            out["default_factory"] = ast.unparse(kw["default_factory"])
        elif default is MISSING or (isinstance(default, ast.Constant) and default.value is Ellipsis):
            out["required"] = True
        else:
            out["default"] = _value(default)
        if "alias" in kw:
            out["alias"] = _value(kw["alias"])
        if "validation_alias" in kw:  # names accepted on input: AliasChoices("a", "b") or one name
            va = kw["validation_alias"]
            names = va.args if isinstance(va, ast.Call) and _name(va.func) == "AliasChoices" else [va]
            out["validation_alias"] = [_value(n) for n in names]
        status = _value(kw["status"]) if "status" in kw else None
        extra = kw.get("json_schema_extra")
        if status is None and isinstance(extra, ast.Dict):
            for k, v in zip(extra.keys, extra.values):
                if isinstance(k, ast.Constant) and k.value == "status":
                    status = _value(v)
        if status is not None:
            out["status"] = status
        deprecated = _value(kw["deprecated"]) if "deprecated" in kw else None
        out["deprecated"] = bool(deprecated) or status == "deprecated"
        if isinstance(deprecated, str):
            out["deprecation"] = deprecated
        return out
    out["default"] = _value(value)
    return out


def read_classes(source: str) -> tuple[dict[str, dict], dict[str, ast.AST]]:
    """Every class of the module: bases, own extra policy, own fields (in order); and type aliases."""
    tree = ast.parse(source)
    classes: dict[str, dict] = {}
    aliases: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields = {}
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    f = _field(stmt)
                    if f is not None:
                        fields[stmt.target.id] = f
            classes[node.name] = {"bases": [_name(b) for b in node.bases], "extra": _extra_of(node.body),
                                  "fields": fields}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                and _name(node.annotation) == "TypeAlias":
            aliases[node.target.id] = node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Subscript):
            aliases[node.targets[0].id] = node.value
    return classes, aliases


def resolve(classes: dict[str, dict]) -> dict[str, dict]:
    """Pydantic model classes with inherited fields and extra policy."""
    done: dict[str, dict | None] = {}

    def walk(name: str, depth: int = 0) -> dict | None:
        if name in done:
            return done[name]
        if name in PYDANTIC_BASES and name not in classes:
            return {"extra": PYDANTIC_BASES[name], "fields": {}}
        cls = classes.get(name)
        if cls is None or depth > 50:
            return None
        parents = [p for p in (walk(b, depth + 1) for b in cls["bases"]) if p is not None]
        if not parents:
            done[name] = None
            return None
        fields: dict[str, dict] = {}
        for parent in reversed(parents):  # the first base wins, as in the MRO
            fields.update(parent["fields"])
        fields.update(cls["fields"])
        extra = cls["extra"] or (parents[0]["extra"] if parents else None) or "ignore"
        done[name] = {"extra": extra, "fields": fields, "bases": cls["bases"]}
        return done[name]

    for name in classes:
        walk(name)
    return {k: v for k, v in done.items() if v is not None}


def held_classes(annotation: str, aliases: dict[str, ast.AST], models: dict[str, dict]) -> list[str]:
    """The model classes a field's annotation can hold (through type aliases)."""
    found: list[str] = []

    def visit(node: ast.AST, depth: int = 0) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if sub.id in models and sub.id not in found:
                    found.append(sub.id)
                elif sub.id in aliases and depth < 5:
                    visit(aliases[sub.id], depth + 1)

    visit(ast.parse(annotation, mode="eval"))
    return found


def release_view(source: str) -> dict:
    """What one release accepts: the classes reachable from the roots, and what each field holds."""
    classes, aliases = read_classes(source)
    models = resolve(classes)
    keep: list[str] = []
    todo = [r for r in (*ROOTS.values(), "BaseLlmArgs") if r in models]
    field_class: dict[str, Any] = {}
    while todo:
        name = todo.pop(0)
        if name in keep:
            continue
        keep.append(name)
        own = classes[name]["fields"] if name in classes else {}
        for fname, f in models[name]["fields"].items():
            held = held_classes(f["type"], aliases, models)
            factory = f.get("default_factory")
            if factory in models and factory not in held:
                held.append(factory)
            if held and fname in own:  # recorded on the class that declares the field
                field_class[f"{name}.{fname}"] = held[0] if len(held) == 1 else held
            todo.extend(h for h in held if h not in keep)
        todo.extend(b for b in models[name].get("bases", []) if b in models and b not in keep)
    return {"classes": {n: {"extra": models[n]["extra"], "fields": models[n]["fields"]} for n in keep},
            "roots": {k: v for k, v in ROOTS.items() if v in models},
            "field_class": field_class}


# --------------------------------------------------------------------------------------------
# Across releases
# --------------------------------------------------------------------------------------------
def _segments(releases: list[str], value_of) -> list[dict]:
    runs: list[dict] = []
    prev_present = False
    for r in releases:
        value = value_of(r)
        if value is MISSING:
            prev_present = False
            continue
        if runs and prev_present and runs[-1]["_value"] == value:
            runs[-1]["last"] = r
        else:
            runs.append({"first": r, "last": r, "_value": value})
        prev_present = True
    return runs


def combine(views: dict[str, dict], how: dict[str, str], sources: dict[str, str]) -> dict:
    releases = list(views)
    out: dict[str, Any] = {"generator": "tools/gen_trtllm_options.py", "releases": releases, "how": how,
                           "sources": sources, "classes": {}, "roots": {}, "field_class": {}}
    names = sorted({n for v in views.values() for n in v["classes"]})
    for name in names:
        segs = _segments(releases, lambda r: views[r]["classes"].get(name, MISSING))
        out["classes"][name] = [{"first": s["first"], "last": s["last"], **s["_value"]} for s in segs]
    for backend in ROOTS:
        segs = _segments(releases, lambda r: views[r]["roots"].get(backend, MISSING))
        out["roots"][backend] = [{"first": s["first"], "last": s["last"], "class": s["_value"]} for s in segs]
    keys = sorted({k for v in views.values() for k in v["field_class"]})
    for key in keys:
        segs = _segments(releases, lambda r: views[r]["field_class"].get(key, MISSING))
        if len(segs) == 1 and segs[0]["first"] == releases[0] and segs[0]["last"] == releases[-1]:
            out["field_class"][key] = segs[0]["_value"]
        else:
            out["field_class"][key] = [{"first": s["first"], "last": s["last"], "class": s["_value"]} for s in segs]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="folder of one sub-folder per release, named by the version")
    ap.add_argument("--note", action="append", default=[], metavar="VERSION=TEXT",
                    help="how a release's input was obtained (recorded in 'sources')")
    ap.add_argument("--missing", action="append", default=[], metavar="VERSION=REASON",
                    help="a release wanted but not read, and why (recorded in 'missing')")
    args = ap.parse_args()
    notes = dict(n.split("=", 1) for n in args.note)
    folders = sorted((d for d in args.root.iterdir() if d.is_dir()), key=lambda d: Version(d.name))
    views, how, sources = {}, {}, {}
    for folder in folders:
        text, what = read_release(folder)
        views[folder.name] = release_view(text)
        how[folder.name] = "ast"
        sources[folder.name] = what + (f"; {notes[folder.name]}" if folder.name in notes else "")
    out = combine(views, how, sources)
    out["missing"] = dict(m.split("=", 1) for m in args.missing)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
