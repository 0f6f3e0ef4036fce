"""YAML documents with positions, read the way the frameworks read them.

vLLM and TensorRT-LLM load YAML with PyYAML's safe loader, so documents are composed with PyYAML
(its C parser where the wheel has it: about 0.2 ms for a typical file) and resolved as YAML 1.1
(``yes``/``off`` are booleans). Each key and item keeps the line and column of its node. Alias expansion is bounded (a "billion laughs" file is refused,
not expanded), nesting is bounded, and duplicate keys are errors. Helm ``{{ }}`` template actions
are neutralised first so chart templates can still be read; values that came from a template are
remembered and skipped by the rules.
"""

from __future__ import annotations

import bisect
import re
import sys
from datetime import date, datetime
from typing import Any, Sequence

from sits_doctor.errors import InputError
from sits_doctor.source import MAX_DEPTH, MAX_NODES, Pos, SourceDoc, join_pointer

TEMPLATE_MARK = "__tp"


# Helm actions are found by the scanners below, not by regular expressions: the patterns they
# replace (``(\{\{-?.*?-?\}\}\s*)+$`` and ``\{\{-?[^}]*?\n.*?-?\}\}``) backtrack exponentially or
# cubically on a line of many ``{{``/``}}`` (a 221-byte line ran for over a minute). Each scanner
# moves only forward, so it is linear in the text.
def template_actions(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``[start, end)`` spans of the ``{{ ... }}`` actions in ``text[start:end]``: each ``{{`` up
    to the first ``}}`` after it (an unclosed ``{{`` ends the search: no later one can close)."""
    end = len(text) if end is None else end
    spans = []
    i = text.find("{{", start, end)
    while i != -1:
        close = text.find("}}", i + 2, end)
        if close == -1:
            break
        spans.append((i, close + 2))
        i = text.find("{{", close + 2, end)
    return spans


def _multiline_actions(text: str) -> list[tuple[int, int]]:
    """Spans of the actions that span lines: a ``{{`` with a line break before its first ``}``,
    up to the first ``}}`` after that break (``{{/* a comment */}}`` over several lines)."""
    spans = []
    brace = newline = -1  # the first '}' / line break at or after the last place looked from
    i = text.find("{{")
    while i != -1:
        at = i + 2
        if brace < at:
            brace = text.find("}", at)
            brace = len(text) if brace == -1 else brace
        if newline < at:
            newline = text.find("\n", at)
            if newline == -1:  # no line break left: no later action spans lines
                break
        if newline < brace:
            close = text.find("}}", newline + 1)
            if close == -1:  # nothing closes it, nor any later one
                break
            spans.append((i, close + 2))
            i = text.find("{{", close + 2)
        else:
            i = text.find("{{", i + 1)
    return spans


def _is_control_line(line: str) -> bool:
    """Whether a line is a Helm control line, blanked whole: after its indentation it starts with
    ``{{`` and it ends with ``}}`` (``{{- if .x }}``, ``{{ end }}``; what lies between is not
    looked at, as the pattern this replaces did not)."""
    body = line.strip()
    return len(body) >= 4 and body.startswith("{{") and body.endswith("}}")


def neutralize_templates(text: str, keep: Sequence[tuple[int, int]] = ()) -> tuple[str, list[tuple[int, int]]]:
    """Blank Helm control lines and replace inline ``{{ }}`` actions by a marker.

    Every character keeps its offset (a marker is exactly as long as the action it replaces:
    ``__tp`` and underscores; an action is at least 4 characters), so positions read from the
    neutralised text are positions in the real file. Returns the new text and the ``[start,
    end)`` spans of the actions.

    ``keep``: spans of block scalars (``|``, ``>``) of a text that is valid YAML as it stands (a
    ConfigMap holding a Jinja chat template). Inside them an action is text, and blanking its line
    would change the scalar's indentation (a leading all-space line longer than the first
    content line ends the scalar): there every action is masked in place, its line breaks and
    indentation kept.
    """
    if "{{" not in text:
        return text, []
    spans: list[tuple[int, int]] = []
    chars = list(text)
    keep = sorted(keep)
    keep_starts = [a for a, _ in keep]

    def kept(at: int) -> bool:
        i = bisect.bisect_right(keep_starts, at) - 1
        return i >= 0 and at < keep[i][1]

    def blank(start: int, end: int) -> None:
        spans.append((start, end))
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "

    def mask(start: int, end: int) -> None:
        spans.append((start, end))
        marker = iter(TEMPLATE_MARK)
        for i in range(start, end):
            if chars[i] not in " \t\r\n":
                chars[i] = next(marker, "_")

    for a, b in _multiline_actions(text):  # an action spanning lines ({{/* comment */}}, ...)
        (mask if kept(a) else blank)(a, b)
    offset = 0
    for line in "".join(chars).split("\n"):
        if _is_control_line(line) and not kept(offset + len(line) - len(line.lstrip())):
            blank(offset, offset + len(line))
        else:
            for a, b in template_actions(line):
                n = b - a
                spans.append((offset + a, offset + b))
                chars[offset + a: offset + b] = list((TEMPLATE_MARK + "_" * n)[:n])
        offset += len(line) + 1
    return "".join(chars), sorted(spans)


# PyYAML's pure-Python Reader compiles this full-Unicode character class when ``yaml`` is
# imported (yaml/reader.py, Reader.NON_PRINTABLE): about 8 ms, half of ``import yaml`` and a
# tenth of a one-file check. Only the pure-Python reader uses it (the C parser checks characters
# itself), so :func:`yaml_module` defers compiling it to its first use.
_NON_PRINTABLE_PREFIX = "[^\x09\x0A\x0D\x20-\x7E\x85"


class _DeferredPattern:
    """A stand-in for ``re.compile(pattern, flags)`` that compiles on first use."""

    def __init__(self, pattern: str, flags: int):
        self._args = (pattern, flags)
        self._compiled: re.Pattern | None = None

    def __getattr__(self, name: str):
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


def yaml_module():
    """``import yaml``, deferring the one import-time regex the C parser never uses."""
    module = sys.modules.get("yaml")
    if module is not None:
        return module
    compile_ = re.compile

    def deferring(pattern, flags=0):
        if isinstance(pattern, str) and pattern.startswith(_NON_PRINTABLE_PREFIX):
            return _DeferredPattern(pattern, flags)
        return compile_(pattern, flags)

    re.compile = deferring
    try:
        import yaml
    finally:
        re.compile = compile_
    return yaml


def _block_scalars(text: str, loader_cls) -> list[tuple[int, int]]:
    """Spans of the block scalars of ``text`` when it is valid YAML as written (else none)."""
    yaml = yaml_module()
    try:
        return [(e.start_mark.index, e.end_mark.index) for e in yaml.parse(text, Loader=loader_cls)
                if isinstance(e, yaml.ScalarEvent) and e.style in ("|", ">")]
    except yaml.YAMLError:
        return []


def parse_yaml(text: str, display: str) -> list[SourceDoc]:
    """Parse every document of a YAML stream into positioned :class:`SourceDoc` objects.

    ``{{ }}`` actions are neutralised first (Helm chart templates are not YAML until rendered).
    Valid YAML always parses as written: when neutralising breaks a text that parses as it
    stands, the text is read as it stands (its ``{{`` values are marked as templated)."""
    yaml = yaml_module()

    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    keep = _block_scalars(text, loader_cls) if "{{" in text else []
    work, template_spans = neutralize_templates(text, keep)
    try:
        return _parse(work, text, display, template_spans, loader_cls)
    except InputError as err:
        if not template_spans:
            raise
        try:
            as_written = _parse(text, text, display, [], loader_cls)
        except InputError:
            raise err from None
        for doc in as_written:
            doc.templated = {p for p, v in doc.derived.pop("scalars", {}).items() if "{{" in v}
        return as_written


def _parse(work: str, text: str, display: str, template_spans: list[tuple[int, int]], loader_cls) -> list[SourceDoc]:
    yaml = yaml_module()
    n_templates = len(template_spans)
    docs: list[SourceDoc] = []
    try:
        for i, root in enumerate(yaml.compose_all(work, Loader=loader_cls)):
            if root is None:
                continue
            walker = _Walker(display, work)
            if "&" in work:  # without an anchor no node has a second use (an alias needs one)
                walker.count_uses(root)
            data = walker.convert(root, "", 0)
            doc = SourceDoc(display, "yaml", data, walker.positions, text, index=i,
                            template_spans=tuple(template_spans), shared=walker.shared)
            if n_templates:
                doc.templated = {p for p, v in walker.scalars.items() if TEMPLATE_MARK in v}
            elif "{{" in work:
                doc.derived["scalars"] = walker.scalars
            docs.append(doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        at = getattr(mark, "index", None) if mark else None
        if "tab" not in problem and isinstance(at, int) and work[at:at + 1] == "\t":
            problem += " (a tab character: YAML indents with spaces only)"
        line = mark.line + 1 if mark else None
        col = mark.column + 1 if mark else None
        hint = " (after neutralising Helm {{ }} templates)" if n_templates else ""
        render = "; template logic builds this YAML: check what `helm template` renders instead" if n_templates else ""
        raise InputError(display, f"invalid YAML{hint}: {problem}{render}", line, col) from None
    except yaml.YAMLError as exc:
        raise InputError(display, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InputError(display, f"YAML nested deeper than {MAX_DEPTH} levels") from None
    return docs


_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"
_yaml: Any = None  # the yaml module, set by parse_yaml before any _Walker converts


class _Walker:
    """Turns a PyYAML node tree into plain data, recording positions and bounding its size.

    Scalars are resolved the way PyYAML's safe loader resolves them (YAML 1.1, as vLLM reads its
    config files); duplicate keys are errors; merge keys (``<<``) are honoured.
    """

    def __init__(self, display: str, text: str = ""):
        global _yaml
        yaml = _yaml = yaml_module()

        self.display = display
        self.text = text
        self.positions: dict[str, Pos] = {}
        self.scalars: dict[str, str] = {}
        self.nodes = 0
        self.active: set[int] = set()
        self.uses: dict[int, int] = {}  # node id -> how many places refer to it
        self.shared: set[str] = set()
        self.constructor = yaml.constructor.SafeConstructor()

    def count_uses(self, root: Any) -> None:
        """How many places refer to each node (an anchored node is used by each of its aliases)."""
        stack = [root]
        while stack and len(self.uses) <= MAX_NODES:
            node = stack.pop()
            self.uses[id(node)] = self.uses.get(id(node), 0) + 1
            if self.uses[id(node)] == 1 and isinstance(node.value, list):
                for item in node.value:
                    stack.extend(item if isinstance(item, tuple) else (item,))

    def convert(self, node: Any, pointer: str, depth: int) -> Any:
        yaml = _yaml

        self.nodes += 1
        if self.uses.get(id(node), 1) > 1:
            self.shared.add(pointer)
        if pointer == "":
            self.positions[""] = _pos(node, self.text)
        if self.nodes > MAX_NODES:
            raise InputError(
                self.display,
                f"document expands to more than {MAX_NODES} nodes (YAML alias bomb?); refusing",
                *self._at(pointer),
            )
        if depth > MAX_DEPTH:
            raise InputError(self.display, f"nested deeper than {MAX_DEPTH} levels", *self._at(pointer))
        if isinstance(node, yaml.ScalarNode):
            value = self._scalar(node)
            if isinstance(value, str):
                self.scalars[pointer] = value
            return value
        if id(node) in self.active:
            raise InputError(self.display, "recursive YAML alias", *self._at(pointer))
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                out_list = []
                for i, child in enumerate(node.value):
                    ptr = join_pointer(pointer, i)
                    self.positions[ptr] = _pos(child, self.text)
                    out_list.append(self.convert(child, ptr, depth + 1))
                return out_list
            out: dict[str, Any] = {}
            pairs = node.value
            merges = any(k.tag == _MERGE for k, _ in pairs)
            own = {id(k) for k, _ in pairs} if merges else None
            for key_node, value_node in self._pairs(node, depth) if merges else self._own_pairs(pairs):
                key = self._key(key_node)
                ptr = join_pointer(pointer, key)
                if own is not None and id(key_node) not in own:
                    self.shared.add(ptr)  # merged in with <<: written in another mapping
                k_line, k_col, k_start, k_end, _ = _span(key_node, self.text)
                line, col, start, end, style = _span(value_node, self.text)
                self.positions[ptr] = Pos(line, col, k_line, k_col, start, end, k_start, k_end, style)
                out[key] = self.convert(value_node, ptr, depth + 1)
            return out
        finally:
            self.active.discard(id(node))

    def _own_pairs(self, pairs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """:meth:`_pairs` of a mapping without merge keys: its pairs, duplicates refused."""
        scalar = _yaml.ScalarNode
        seen = set()
        for key_node, _ in pairs:
            key = key_node.value if isinstance(key_node, scalar) else id(key_node)
            if key in seen:
                line, col = _pos(key_node).line, _pos(key_node).col
                raise InputError(self.display, f"duplicate key {key!r}", line, col)
            seen.add(key)
        return pairs

    def _pairs(self, node: Any, depth: int) -> list[tuple[Any, Any]]:
        """The mapping's pairs as PyYAML's safe loader builds its dict: the pairs it merges with
        ``<<`` in the order written (``flatten_mapping``, PyYAML 6.0.4: of ``<<: [*a, *b]`` a key
        of ``b`` wins over the same key of ``a``), then its own (duplicates refused), which win
        over merged ones; each key in its first place with its last value. Every merged pair
        counts towards the node limit: merges that double at each step are an alias bomb too."""
        yaml = _yaml

        own, merged, seen = [], [], set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for src in sources:
                    if isinstance(src, yaml.MappingNode):
                        if depth > MAX_DEPTH:
                            raise InputError(self.display, f"merges (<<) nested deeper than {MAX_DEPTH} levels",
                                             *_pos(src)[:2])
                        merged.extend(self._pairs(src, depth + 1))
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            if key in seen:
                line, col = _pos(key_node).line, _pos(key_node).col
                raise InputError(self.display, f"duplicate key {key!r}", line, col)
            seen.add(key)
            own.append((key_node, value_node))
        if not merged:
            return own
        self.nodes += len(merged)
        if self.nodes > MAX_NODES:
            raise InputError(self.display, f"merges (<<) expand to more than {MAX_NODES} nodes (YAML alias bomb?); "
                                           "refusing", *_pos(node)[:2])
        pairs: dict[str, tuple[Any, Any]] = {}
        for key_node, value_node in merged + own:
            pairs[self._key(key_node)] = (key_node, value_node)
        return list(pairs.values())

    def _key(self, node: Any) -> str:
        """A mapping key as the data's key: a scalar, resolved and as text. A list or mapping as
        a key (``? [a, b]``) is refused, as PyYAML's safe loader refuses it ("found unhashable
        key"); its text would be the whole node tree's repr."""
        if not isinstance(node, _yaml.ScalarNode):
            line, col = _pos(node)[:2]
            raise InputError(self.display, "a list or mapping as a key: the frameworks' YAML loader refuses it "
                                           "(unhashable key)", line, col)
        key = self._scalar(node)
        return key if isinstance(key, str) else str(key)

    def _scalar(self, node: Any) -> Any:
        if node.tag == _STR:  # most scalars: the constructor would return the text as it is
            return node.value
        try:
            value = self.constructor.construct_object(node)
        except Exception:  # an unknown tag (!Ref, !!python/...) is read as its text, never run
            return node.value
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (datetime, date)):
            return value.isoformat()
        return str(value)

    def _at(self, pointer: str) -> tuple[int, int]:
        pos = self.positions.get(pointer, Pos(1, 1))
        return pos.line, pos.col


def _pos(node: Any, text: str = "") -> Pos:
    """The node's position; a block scalar's span stops before its trailing line breaks and a
    plain multi-line scalar's before trailing blanks."""
    line, col, start, end, style = _span(node, text)
    return Pos(line, col, start=start, end=end, style=style)


def _span(node: Any, text: str) -> tuple[int, int, int, int, str | None]:
    """(line, column, start, end, style) of :func:`_pos`."""
    mark, end = node.start_mark, node.end_mark.index
    style = getattr(node, "style", None)
    if style is None:
        flow = getattr(node, "flow_style", None)
        style = None if flow is None or not isinstance(node.value, list) else ("flow" if flow else "block")
    if text and style in ("|", ">", None, "block"):
        while end > mark.index and text[end - 1] in " \t\r\n":
            end -= 1
    return mark.line + 1, mark.column + 1, mark.index, end, style or None


def parse_embedded(doc: SourceDoc, pointer: str) -> list[SourceDoc]:
    """The YAML documents inside the string at ``pointer`` (a KubeRay ``serveConfigV2: |``),
    positioned in the file itself: every offset of the inner documents is mapped back through
    the scalar's characters, so findings point at the file and fixes edit it. A mapped span that
    does not sit in the file character for character (a folded or escaped scalar) keeps no
    offsets (its fixes are display-only). Raises InputError when the string is not valid YAML."""
    from sits_doctor.loaders.shell import scalar_offsets, source_span

    value = doc.data
    for part in [p for p in pointer.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        value = value[int(part)] if isinstance(value, list) else value[part]
    pos = doc.pos(pointer)
    offsets = scalar_offsets(doc.text, pos.start, pos.end, pos.style, value) if pos.start >= 0 else []
    inner_docs = parse_yaml(value, doc.path)

    def mapped(start: int, end: int) -> tuple[int, int]:
        if not offsets or start < 0:
            return -1, -1
        if end <= start:
            at = offsets[start] if start < len(offsets) else -1
            return at, at
        return source_span(offsets, start, end)

    out = []
    for inner in inner_docs:
        positions: dict[str, Pos] = {}
        for ptr, p in inner.positions.items():
            start, end = mapped(p.start, p.end)
            key_start, key_end = mapped(p.key_start, p.key_end) if p.key_start >= 0 else (-1, -1)
            line, col = doc.lines.linecol(start) if start >= 0 else (pos.line, pos.col)
            key_line = key_col = None
            if p.key_line is not None:
                key_line, key_col = doc.lines.linecol(key_start) if key_start >= 0 else (line, col)
            positions[ptr] = Pos(line, col, key_line, key_col, start, end, key_start, key_end, p.style)
        out.append(SourceDoc(doc.path, "yaml", inner.data, positions, doc.text, index=doc.index,
                             templated=set(inner.templated) | ({""} if pointer in doc.templated else set()),
                             shared=inner.shared))
    return out


def parse_span(text: str, start: int, end: int, display: str) -> list[SourceDoc]:
    """The YAML documents written at ``text[start:end]`` (a here-document in a launch script),
    positioned in ``text`` itself: the span is a verbatim slice, so every offset moves by
    ``start`` and lines and columns are read from the whole text. Raises InputError (at its
    line in ``text``) when the slice is not valid YAML."""
    from sits_doctor.source import LineIndex

    lines = LineIndex(text)
    try:
        inner_docs = parse_yaml(text[start:end], display)
    except InputError as err:
        if err.line is None:
            raise
        line, _ = lines.linecol(start)
        raise InputError(display, err.message, line + err.line - 1, err.col) from None

    def moved(at: int) -> int:
        return at + start if at >= 0 else at

    out = []
    for inner in inner_docs:
        positions: dict[str, Pos] = {}
        for ptr, p in inner.positions.items():
            s, e, ks, ke = moved(p.start), moved(p.end), moved(p.key_start), moved(p.key_end)
            line, col = lines.linecol(s) if s >= 0 else (p.line, p.col)
            key_line = key_col = None
            if p.key_line is not None:
                key_line, key_col = lines.linecol(ks) if ks >= 0 else (line, col)
            positions[ptr] = Pos(line, col, key_line, key_col, s, e, ks, ke, p.style)
        out.append(SourceDoc(display, "yaml", inner.data, positions, text, index=inner.index,
                             templated=set(inner.templated), shared=inner.shared,
                             template_spans=tuple((a + start, b + start) for a, b in inner.template_spans)))
    return out
