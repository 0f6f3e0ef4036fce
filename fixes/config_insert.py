"""Fix builders that add: a key to a mapping, items to an argument list, words to a command line.

New text follows its neighbours: a YAML key goes on its own line after the last key of the
mapping with the same indentation; a JSON member gets the indentation, the line break (LF or
CRLF) and the comma style of the members around it; list items copy the previous item's dash
column or flow style; a command line gets the words after its last option (on a new continued
line when the options stand one per line). Where there is nothing to copy from (an empty flow
mapping written on several lines, a templated mapping) the fix is display-only and says why.
"""

from __future__ import annotations

import json
from typing import Any

from sits_doctor.finding import Edit, Fix, Safety
from sits_doctor.fixes import config_style as style
from sits_doctor.fixes.config_style import CannotEdit
from sits_doctor.plan import Plan, Site
from sits_doctor.source import Pos, SourceDoc


def add_option(plan: Plan, name: str, value: Any, title: str, safety: Safety = Safety.SAFE) -> Fix | None:
    """Add the option ``name`` (as the framework names it, e.g. ``max_model_len``) with ``value``
    (``True`` for a flag without value) where the plan's options are written."""
    doc = plan.doc
    if doc is None:
        return None
    try:
        if plan.kind == "vllm-yaml" or plan.args_site is None:
            key = _spelled_like_siblings(doc, "", name)
            edits = [add_member(doc, "", key, value)]
        else:
            edits = [add_words(doc, plan.args_site, _words_for(name, value))]
        for e in edits:
            if doc.touches_template(e.start, e.end):
                raise CannotEdit("the edit would touch a {{ }} template action")
    except CannotEdit as why:
        return Fix(title, doc.path, (), Safety.DISPLAY, str(why), doc.text)
    return Fix(title, doc.path, tuple(edits), safety, None, doc.text)


def _words_for(name: str, value: Any) -> list[str]:
    flag = "--" + name.replace("_", "-")
    if value is True:
        return [flag]
    text = json.dumps(value) if isinstance(value, (bool, dict, list)) else str(value)
    return [flag, text]


def _spelled_like_siblings(doc: SourceDoc, parent: str, name: str) -> str:
    """``max_model_len`` or ``max-model-len``, whichever the mapping's keys use more."""
    keys = [p.rsplit("/", 1)[-1] for p in doc.positions if p and style.parent(p) == parent]
    dashed = sum("-" in k for k in keys)
    underscored = sum("_" in k for k in keys)
    return name.replace("_", "-") if dashed >= underscored else name


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _members(doc: SourceDoc, parent: str) -> list[tuple[str, Pos]]:
    return sorted(((p, pos) for p, pos in doc.positions.items() if p and style.parent(p) == parent),
                  key=lambda item: item[1].start)


def add_member(doc: SourceDoc, parent: str, key: str, value: Any) -> Edit:
    """Insert ``key: value`` as the last member of the mapping at ``parent``."""
    container = doc.positions.get(parent)
    if container is None or container.start < 0:
        raise CannotEdit("the mapping's position is unknown")
    members = _members(doc, parent)
    text, nl = doc.text, _newline(doc.text)
    if doc.fmt == "json" or container.style == "flow":
        key_text = json.dumps(key) if doc.fmt == "json" else style.key_text(doc, Pos(1, 1, key_start=-1), key)
        value_text = json.dumps(value) if doc.fmt == "json" else style.scalar_text(doc, None, value)
        entry = f"{key_text}: {value_text}"
        if not members:
            close = text.find("}", container.start)
            if "\n" in text[container.start:close]:
                raise CannotEdit("the mapping is empty and written on several lines")
            return Edit(close, close, entry)
        last = members[-1][1]
        first_line = style.line_start(text, members[0][1].key_start)
        indent = text[first_line: members[0][1].key_start]
        if indent.strip() or style.line_start(text, last.key_start) == style.line_start(text, container.start):
            return Edit(last.end, last.end, f", {entry}")  # members share a line: stay on it
        return Edit(last.end, last.end, f",{nl}{indent}{entry}")
    if not members:
        raise CannotEdit("the mapping has no key to take the indentation from")
    last_key = members[-1][1]
    indent_start = style.line_start(text, members[0][1].key_start)
    indent = text[indent_start: members[0][1].key_start]
    if indent.strip():
        raise CannotEdit("the mapping's keys do not start their lines")
    at = style.line_end(text, last_key.end)
    prefix = "" if at == 0 or text[at - 1] == "\n" else nl
    return Edit(at, at, f"{prefix}{indent}{style.key_text(doc, Pos(1, 1, key_start=-1), key)}: "
                        f"{style.scalar_text(doc, None, value)}{nl}")


def add_words(doc: SourceDoc, args: Site, words: list[str]) -> Edit:
    """Append command-line words after the last word of ``args`` (an argv list or a shell string)."""
    if not args.words:
        raise CannotEdit("there is no argument to add after")
    last = args.words[-1]
    if last.start < 0:
        raise CannotEdit("the last argument is inside an escaped or folded string")
    text, nl = doc.text, _newline(doc.text)
    if args.kind == "argv":
        return _add_items(doc, last.pointer, words)
    if args.kind != "shell" or not all(style.plain_shell(w) for w in words):
        raise CannotEdit("the new words need quoting")
    line0 = style.line_start(text, last.start)
    before = text[line0: last.start]
    previous = text[max(0, line0 - 3): line0].rstrip("\r\n")
    if not before.strip() and previous.endswith("\\"):
        return Edit(last.end, last.end, f" \\{nl}{before}{' '.join(words)}")
    return Edit(last.end, last.end, " " + " ".join(words))


def _add_items(doc: SourceDoc, last_item: str, words: list[str]) -> Edit:
    text, nl = doc.text, _newline(doc.text)
    parent = doc.positions.get(style.parent(last_item))
    last = doc.positions[last_item]
    if doc.fmt == "json" or (parent is not None and parent.style == "flow"):
        line0 = style.line_start(text, last.start)
        own_line = not text[line0: last.start].strip()
        quote = '"' if doc.fmt == "json" or last.style != "'" else "'"
        items = [json.dumps(w) if quote == '"' else f"'{w}'" for w in words]
        if own_line:
            indent = text[line0: last.start]
            return Edit(last.end, last.end, "".join(f",{nl}{indent}{item}" for item in items))
        return Edit(last.end, last.end, "".join(f", {item}" for item in items))
    dash = text.rfind("-", 0, last.start)
    line0 = style.line_start(text, dash)
    if dash < 0 or text[line0:dash].strip():
        raise CannotEdit("the list items do not start their lines")
    indent = text[line0:dash]
    gap = text[dash + 1: last.start]
    at = style.line_end(text, last.end)
    prefix = "" if text[at - 1: at] == "\n" else nl
    quoted = [style.scalar_text(doc, Pos(1, 1, style=last.style), w) for w in words]
    return Edit(at, at, prefix + "".join(f"{indent}-{gap}{w}{nl}" for w in quoted))
