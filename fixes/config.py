"""Fix builders for config files: edits that write in the file's own style.

A builder takes a :class:`~sits_doctor.plan.Setting` (which knows how it was written, its
:class:`~sits_doctor.plan.Site`) and returns a :class:`~sits_doctor.finding.Fix` of character
range edits. Nothing is re-serialised: a removed YAML entry takes its whole line(s) with it, a
removed JSON member or flow item takes one neighbouring comma, a removed command-line option
takes its value word(s) and, when it stood alone on a line of a shell script, the line; a
renamed key keeps its quoting. When an edit cannot be made without reformatting (inside a Helm
``{{ }}`` action, a YAML alias, an escaped or folded scalar, a value spread over a list item we
do not own), the fix is display-only and says why.
"""

from __future__ import annotations

import re
from typing import Any

from sits_doctor.finding import Edit, Fix, Safety
from sits_doctor.fixes.config_style import CannotEdit
from sits_doctor.fixes.config_style import key_text as _key_text
from sits_doctor.fixes.config_style import line_end as _line_end
from sits_doctor.fixes.config_style import line_start as _line_start
from sits_doctor.fixes.config_style import parent as _parent
from sits_doctor.fixes.config_style import plain_shell as _plain_shell
from sits_doctor.fixes.config_style import plain_value as _plain_value
from sits_doctor.fixes.config_style import scalar_text as _scalar_text
from sits_doctor.plan import Setting, Site, Word
from sits_doctor.source import Pos, SourceDoc

_ANCHOR = re.compile(r"(?:^|[\s\[{,:-])&[^\s,\[\]{}]+")


# --- public builders ---------------------------------------------------------------------------

def remove(setting: Setting, title: str, safety: Safety = Safety.SAFE) -> Fix | None:
    """Remove an option: a mapping entry, or a flag with its value words."""
    return _build(setting, title, safety, lambda site, doc: _remove_site(site, doc))


def rename(setting: Setting, new_key: str, title: str, safety: Safety = Safety.SAFE, *, target=None) -> Fix | None:
    """Rename an option, keeping its value: ``new_key`` as it should be written (a YAML/JSON key,
    or a flag such as ``--new-flag``). With a vLLM ``target``, the new flag is checked against
    the releases in play (:func:`sits_doctor.fixes.config_versions.checked`)."""
    fix = _build(setting, title, safety, lambda site, doc: _rename_site(site, doc, new_key))
    return _for_target(fix, new_key, target)


def replace_value(setting: Setting, value: Any, title: str, safety: Safety = Safety.SAFE) -> Fix | None:
    """Write a new value for an option, in the quoting the file uses there."""
    return _build(setting, title, safety, lambda site, doc: _replace_value_site(site, doc, value))


def rewrite_word(setting: Setting, word: str, title: str, safety: Safety = Safety.SAFE, *, target=None) -> Fix | None:
    """Replace a one-word command-line option (``--flag=value``) by ``word`` (``--no-flag``),
    checked against a vLLM ``target``'s releases like :func:`rename`."""
    def make(site: Site, doc: SourceDoc) -> list[Edit]:
        if site.kind not in ("argv", "shell") or len(site.words) != 1 or site.words[0].start < 0:
            raise CannotEdit("the option is not one word of its own")
        if not _plain_shell(word):
            raise CannotEdit("the new word needs quoting")
        w = site.words[0]
        return [Edit(w.start + len(w.quote), w.end - len(w.quote), word)]

    return _for_target(_build(setting, title, safety, make), word, target)


def _for_target(fix: Fix | None, written: str, target) -> Fix | None:
    """The fix as the target's releases read the flag it writes (a key is ``--key``; a dotted
    field of a JSON option and a plain value are not flags)."""
    if target is None or fix is None:
        return fix
    from sits_doctor.fixes.config_versions import checked

    flag = written.partition("=")[0]
    flag = flag if flag.startswith("-") else "--" + flag
    return checked(fix, [flag], target)


def display(setting: Setting | None, title: str, why: str) -> Fix | None:
    """A fix shown to the user but never applied."""
    site = setting.site if setting is not None else None
    if site is None or site.doc is None:
        return None
    return Fix(title, site.doc.path, (), Safety.DISPLAY, why, site.doc.text)


# --- dispatch ----------------------------------------------------------------------------------

def _build(setting: Setting, title: str, safety: Safety, make) -> Fix | None:
    site = setting.site
    if site is None or site.doc is None:
        return None
    doc = site.doc
    try:
        if setting.templated:
            raise CannotEdit("the value comes from a template or a variable")
        if any(w.start < 0 and "$" in w.text for w in site.words):
            raise CannotEdit("the value comes from an environment variable: change it where the variable is set")
        for pointer in {site.pointer, *(w.pointer for w in site.words)}:
            if doc.is_shared(pointer):
                raise CannotEdit("it is written once for several places (a YAML anchor, alias or << merge)")
        edits = make(site, doc)
        for e in edits:
            if doc.touches_template(e.start, e.end):
                raise CannotEdit("the edit would touch a {{ }} template action")
            if _ANCHOR.search(doc.text, e.start, e.end):
                raise CannotEdit("the edit would change a YAML anchor that other entries may use")
    except CannotEdit as why:
        return Fix(title, doc.path, (), Safety.DISPLAY, str(why), doc.text)
    return Fix(title, doc.path, tuple(sorted(edits, key=lambda e: e.start)), safety, None, doc.text)


def _remove_site(site: Site, doc: SourceDoc) -> list[Edit]:
    if site.kind in ("mapping", "helm"):
        return [_remove_member(doc, site.pointer)]
    if site.kind == "env":
        return [_remove_items(doc, [site.pointer])]
    if site.kind == "argv":
        pointers = list(dict.fromkeys(w.pointer for w in site.words))
        _require_whole_items(doc, site.words)
        return [_remove_items(doc, pointers)]
    if site.kind == "shell":
        return [_remove_words(doc, site.words)]
    raise CannotEdit(f"cannot edit a {site.kind} setting")


def _rename_site(site: Site, doc: SourceDoc, new_key: str) -> list[Edit]:
    if site.kind in ("mapping", "helm"):
        pos = _located(doc, site.pointer, "key")
        return [Edit(pos.key_start, pos.key_end, _key_text(doc, pos, new_key))]
    if site.kind in ("argv", "shell"):
        word = site.words[0]
        if word.start < 0:
            raise CannotEdit("the flag is inside an escaped or folded string")
        inner = word.start + len(word.quote)
        written = doc.text[inner: word.end - len(word.quote)]
        flag = written.partition("=")[0]
        if not new_key.startswith("-"):
            raise CannotEdit("a command-line option needs a flag name")
        if not _plain_shell(new_key):
            raise CannotEdit("the new flag needs quoting")
        return [Edit(inner, inner + len(flag), new_key)]
    raise CannotEdit(f"cannot rename a {site.kind} setting")


def _replace_value_site(site: Site, doc: SourceDoc, value: Any) -> list[Edit]:
    if site.kind in ("mapping", "helm"):
        pos = _located(doc, site.pointer, "value")
        if pos.style in ("|", ">", "flow", "block"):
            raise CannotEdit("the value is a block or a collection")
        if doc.text[pos.start: pos.start + 1] in ("*", "&"):
            raise CannotEdit("the value is a YAML alias or anchor")
        return [Edit(pos.start, pos.end, _scalar_text(doc, pos, value))]
    if site.kind in ("argv", "shell"):
        text = _plain_value(value)
        if site.inline:
            word = site.words[0]
            if word.start < 0:
                raise CannotEdit("the option is inside an escaped or folded string")
            inner = word.start + len(word.quote)
            written = doc.text[inner: word.end - len(word.quote)]
            eq = written.find("=")
            rest = written[eq + 1:]
            q = rest[:1] if rest[:1] in "'\"" and rest[-1:] == rest[:1] and len(rest) >= 2 else ""
            return [Edit(inner + eq + 1, inner + len(written), f"{q}{text}{q}")]
        if len(site.words) != 2:
            raise CannotEdit("the option has no single value word")
        word = site.words[1]
        if word.start < 0:
            raise CannotEdit("the value is inside an escaped or folded string")
        if site.kind == "argv":
            pos = doc.positions.get(word.pointer)
            return [Edit(word.start, word.end, _scalar_text(doc, pos, str(value)))]
        return [Edit(word.start, word.end, f"{word.quote}{text}{word.quote}")]
    raise CannotEdit(f"cannot change a {site.kind} setting")


def _located(doc: SourceDoc, pointer: str, part: str) -> Pos:
    pos = doc.positions.get(pointer)
    if pos is None or (pos.key_start if part == "key" else pos.start) < 0:
        raise CannotEdit(f"the {part}'s position is unknown")
    return pos


# --- removing members and items ----------------------------------------------------------------

def _remove_member(doc: SourceDoc, pointer: str) -> Edit:
    pos = doc.positions.get(pointer)
    if pos is None or pos.key_start < 0 or pos.end < 0:
        raise CannotEdit("the entry's position is unknown")
    parent = doc.positions.get(_parent(pointer))
    if doc.fmt == "json" or (parent is not None and parent.style == "flow"):
        return _remove_flow(doc.text, pos.key_start, pos.end, "}")
    return _remove_block_entry(doc, pos.key_start, pos.end, pointer)


def _remove_items(doc: SourceDoc, pointers: list[str]) -> Edit:
    """Remove consecutive list items (one option's flag and value items, or an env entry)."""
    first, last = doc.positions.get(pointers[0]), doc.positions.get(pointers[-1])
    if first is None or last is None or first.start < 0 or last.end < 0:
        raise CannotEdit("the items' positions are unknown")
    parent = doc.positions.get(_parent(pointers[0]))
    if doc.fmt == "json" or (parent is not None and parent.style == "flow"):
        return _remove_flow(doc.text, first.start, last.end, "]")
    text = doc.text
    dash = text.rfind("-", 0, first.start)
    if dash < 0 or text[dash + 1: first.start].strip() or text[_line_start(text, dash): dash].strip():
        raise CannotEdit("the list item does not start its own line")
    return Edit(_line_start(text, dash), _line_end(text, last.end), "")


def _remove_flow(text: str, start: int, end: int, close: str) -> Edit:
    """Remove ``text[start:end]`` from a JSON / flow collection with one neighbouring comma."""
    after = end
    while after < len(text) and text[after] in " \t\r\n":
        after += 1
    if after < len(text) and text[after] == ",":
        nxt = after + 1
        while nxt < len(text) and text[nxt] in " \t\r\n":
            nxt += 1
        own_line = not text[_line_start(text, start): start].strip()
        rest_of_line = text[after + 1: _line_end(text, after)].strip()
        if own_line and not rest_of_line and "\n" in text[after:nxt]:
            return Edit(_line_start(text, start), _line_end(text, after), "")
        return Edit(start, nxt, "")
    before = start - 1
    while before >= 0 and text[before] in " \t\r\n":
        before -= 1
    if before >= 0 and text[before] == ",":
        return Edit(before, end, "")
    own_line = not text[_line_start(text, start): start].strip()
    if own_line and after < len(text) and text[after] == close and "\n" in text[end:after]:
        return Edit(_line_start(text, start), _line_start(text, after), "")
    return Edit(start, end, "")


def _remove_block_entry(doc: SourceDoc, key_start: int, end: int, pointer: str) -> Edit:
    text = doc.text
    parent = _parent(pointer)
    if not any(_parent(p) == parent and p != pointer and p for p in doc.positions):
        raise CannotEdit("it is the only key of its mapping (removing it would leave null, not {})")
    prefix = text[_line_start(text, key_start): key_start]
    if not prefix.strip():
        return Edit(_line_start(text, key_start), _line_end(text, end), "")
    if prefix.strip() == "-":  # the first key of a sequence item: let the next key take its place
        siblings = [p for p in doc.positions if _parent(p) == _parent(pointer) and p != pointer]
        later = sorted(doc.positions[p].key_start for p in siblings if doc.positions[p].key_start > key_start)
        if later:
            return Edit(key_start, later[0], "")
        raise CannotEdit("it is the only key of its list item")
    raise CannotEdit("the entry shares its line with other YAML content")


def _require_whole_items(doc: SourceDoc, words: tuple[Word, ...]) -> None:
    """Each word must be a list item of its own (not a word inside an item's shell string)."""
    for w in words:
        pos = doc.positions.get(w.pointer)
        if pos is None or w.start < 0 or (pos.start, pos.end) != (w.start, w.end):
            raise CannotEdit("the option shares a list item with other words")


def _remove_words(doc: SourceDoc, words: tuple[Word, ...]) -> Edit:
    if any(w.start < 0 for w in words):
        raise CannotEdit("the option is inside an escaped or folded string")
    text = doc.text
    start, end = words[0].start, words[-1].end
    line0 = _line_start(text, start)
    tail_end = _line_end(text, end)
    tail = text[end:tail_end].rstrip("\r\n").strip()
    if not text[line0:start].strip() and tail in ("", "\\"):
        # the option stood alone on its line: the line goes. If it ended the command (no `\` of its
        # own) while the line above continues onto it, that continuation goes too, so that the
        # next line does not join the command.
        above = text[:line0].rstrip("\r\n")
        if tail == "" and above.endswith("\\") and line0 > 0:
            cut = len(above) - 1
            while cut > 0 and text[cut - 1] in " \t":
                cut -= 1
            end_of_line = tail_end - (2 if text[:tail_end].endswith("\r\n") else 1 if text[:tail_end].endswith("\n") else 0)
            return Edit(cut, end_of_line, "")
        return Edit(line0, tail_end, "")
    ws = start
    while ws > line0 and text[ws - 1] in " \t":
        ws -= 1
    if ws == line0:  # first on its line, more follows: take the spaces after it instead
        while end < len(text) and text[end] in " \t":
            end += 1
        return Edit(start, end, "")
    return Edit(ws, end, "")


