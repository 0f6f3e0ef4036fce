"""YAML documents with positions, read the way the frameworks read them.

vLLM and TensorRT-LLM load YAML with PyYAML and Kubernetes with a YAML 1.1 parser, so documents
are read as YAML 1.1 (``yes``/``off`` are booleans). ruamel.yaml's round-trip loader gives each
key and item its line and column. Alias expansion is bounded (a "billion laughs" file is refused,
not expanded), nesting is bounded, and duplicate keys are errors. Helm ``{{ }}`` template actions
are neutralised first so chart templates can still be read; values that came from a template are
remembered and skipped by the rules.
"""

from __future__ import annotations

import re
import warnings
from datetime import date, datetime
from typing import Any

from sits_doctor.errors import InputError
from sits_doctor.source import MAX_DEPTH, MAX_NODES, Pos, SourceDoc, join_pointer

TEMPLATE_MARK = "__tpl__"
_ACTION = re.compile(r"\{\{-?.*?-?\}\}")
_WHOLE_LINE_ACTION = re.compile(r"^\s*(\{\{-?.*?-?\}\}\s*)+$")


def neutralize_templates(text: str) -> tuple[str, int]:
    """Blank Helm control lines and replace inline ``{{ }}`` actions by a marker.

    Line numbers never change; a marker keeps the action's length where it fits, so columns after
    it mostly stay right. Returns the new text and how many actions were replaced.
    """
    if "{{" not in text:
        return text, 0
    count = 0
    out = []
    for line in text.split("\n"):
        if _WHOLE_LINE_ACTION.match(line):
            count += 1
            out.append("")
            continue

        def repl(m: re.Match[str]) -> str:
            nonlocal count
            count += 1
            return TEMPLATE_MARK + "_" * max(0, len(m.group()) - len(TEMPLATE_MARK))

        out.append(_ACTION.sub(repl, line))
    return "\n".join(out), count


def parse_yaml(text: str, display: str) -> list[SourceDoc]:
    """Parse every document of a YAML stream into positioned :class:`SourceDoc` objects."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    work, n_templates = neutralize_templates(text)
    yaml = YAML(typ="rt")
    yaml.version = (1, 1)
    yaml.allow_duplicate_keys = False
    docs: list[SourceDoc] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, root in enumerate(yaml.load_all(work)):
                walker = _Walker(display)
                data = walker.convert(root, "", 0)
                doc = SourceDoc(display, "yaml", data, walker.positions, text, index=i)
                if n_templates:
                    doc.templated = {p for p, v in walker.scalars.items() if TEMPLATE_MARK in v}
                docs.append(doc)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if "duplicate key" in str(problem) or "found duplicate key" in str(exc):
            problem = _duplicate_message(exc)
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        hint = " (after neutralising Helm {{ }} templates)" if n_templates else ""
        raise InputError(display, f"invalid YAML{hint}: {problem}", line, col) from None
    except YAMLError as exc:
        raise InputError(display, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InputError(display, f"YAML nested deeper than {MAX_DEPTH} levels") from None
    return docs


def _duplicate_message(exc: Any) -> str:
    m = re.search(r'found duplicate key "([^"]*)"', str(exc))
    return f"duplicate key {m.group(1)!r}" if m else "duplicate key"


class _Walker:
    """Turns a ruamel round-trip tree into plain data, recording positions and bounding size."""

    def __init__(self, display: str):
        self.display = display
        self.positions: dict[str, Pos] = {}
        self.scalars: dict[str, str] = {}
        self.nodes = 0
        self.active: set[int] = set()

    def convert(self, node: Any, pointer: str, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            pos = self.positions.get(pointer, Pos(1, 1))
            raise InputError(
                self.display,
                f"document expands to more than {MAX_NODES} nodes (YAML alias bomb?); refusing",
                pos.line,
                pos.col,
            )
        if depth > MAX_DEPTH:
            pos = self.positions.get(pointer, Pos(1, 1))
            raise InputError(
                self.display, f"nested deeper than {MAX_DEPTH} levels", pos.line, pos.col
            )
        if pointer == "":
            line, col = _lc(node)
            self.positions[""] = Pos(line, col)
        if isinstance(node, dict):
            if id(node) in self.active:
                raise InputError(self.display, "recursive YAML alias", *self._at(pointer))
            self.active.add(id(node))
            out = {}
            for key, value in node.items():
                skey = _scalar(key)
                skey = skey if isinstance(skey, str) else str(skey)
                child = join_pointer(pointer, skey)
                self.positions[child] = _map_pos(node, key)
                out[skey] = self.convert(value, child, depth + 1)
            self.active.discard(id(node))
            return out
        if isinstance(node, list):
            if id(node) in self.active:
                raise InputError(self.display, "recursive YAML alias", *self._at(pointer))
            self.active.add(id(node))
            out_list = []
            for i, value in enumerate(node):
                child = join_pointer(pointer, i)
                self.positions[child] = _seq_pos(node, i)
                out_list.append(self.convert(value, child, depth + 1))
            self.active.discard(id(node))
            return out_list
        value = _scalar(node)
        if isinstance(value, str):
            self.scalars[pointer] = value
        return value

    def _at(self, pointer: str) -> tuple[int, int]:
        pos = self.positions.get(pointer, Pos(1, 1))
        return pos.line, pos.col


def _lc(node: Any) -> tuple[int, int]:
    lc = getattr(node, "lc", None)
    if lc is not None and lc.line is not None:
        return lc.line + 1, lc.col + 1
    return 1, 1


def _map_pos(node: Any, key: Any) -> Pos:
    try:
        kl, kc = node.lc.key(key)
        vl, vc = node.lc.value(key)
        return Pos(vl + 1, vc + 1, kl + 1, kc + 1)
    except (AttributeError, KeyError, TypeError):
        line, col = _lc(node)
        return Pos(line, col)


def _seq_pos(node: Any, i: int) -> Pos:
    try:
        line, col = node.lc.item(i)
        return Pos(line + 1, col + 1)
    except (AttributeError, KeyError, TypeError, IndexError):
        line, col = _lc(node)
        return Pos(line, col)


def _scalar(value: Any) -> Any:
    """Plain Python value of a ruamel scalar (its str/int/float/bool subclasses)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return bool(value) if type(value).__name__ == "ScalarBoolean" else int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    tag = getattr(value, "value", None)  # TaggedScalar
    if tag is not None:
        return str(tag)
    return str(value)
