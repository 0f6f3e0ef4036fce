"""Triton Inference Server model configs (``config.pbtxt``, protobuf text format) and the Plan of a
model served by the TensorRT-LLM backend (``backend: "tensorrtllm"``).

:func:`parse_pbtxt` reads the text with protobuf's own tokenizer (``text_format.Tokenizer``) into
a positioned :class:`SourceDoc` without needing Triton's schema: a message is a dict, a field
written several times (or one ``model_config.proto`` declares repeated, e.g. ``input``,
``instance_group``, ``dims``) is a list, scalars stay as written (``TYPE_INT32``, ``KIND_GPU``
are strings; ``true``/``false`` are bools). String maps (``parameters``, ``input_map``, ...) are
read as ``{key: string value}``, so ``/parameters/gpt_model_type`` points at the quoted value and
its key at the ``key: "gpt_model_type"`` string. A ``${name}`` that ``tools/fill_template.py``
has not filled is kept as written and its pointer is in ``doc.templated``.

Facts about the backend's parameters (and the sources they come from):
sits_doctor/frameworks/triton.py.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from sits_doctor.errors import InputError
from sits_doctor.frameworks import triton as triton_fw
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import MAX_DEPTH, LineIndex, Pos, SourceDoc, join_pointer

if TYPE_CHECKING:  # protobuf is imported when a pbtxt is parsed, not with the loaders (~30 ms)
    from google.protobuf import text_format

# Top-level fields only a Triton model config has, written the protobuf way (for files not named
# config.pbtxt). ``max_batch_size: 8`` alone is also a TensorRT-LLM LLM-API YAML line, and
# ``backend: pytorch`` is one too, so a bare value does not count: backend/platform must be
# quoted, and a message field must open a brace or bracket.
_SNIFF = re.compile(
    r"""^(?:(?:backend|platform)[ \t]*:[ \t]*["']
          |max_batch_size[ \t]*:[ \t]*\$\{
          |(?:instance_group|parameters|dynamic_batching|ensemble_scheduling|model_transaction_policy
             |sequence_batching|input|output)[ \t]*[{<\[]
          |(?:instance_group|parameters)[ \t]*:[ \t]*[{<\[])""",
    re.MULTILINE | re.VERBOSE,
)
_QUOTED_STOP = {q: re.compile(r"[" + q + r"\\\n]") for q in "\"'"}  # a string's end, an escape, a line break
_BARE_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_KIND_SCALAR, _KIND_LIST, _KIND_MESSAGE = "scalar", "list", "message"


def is_triton_text(text: str) -> bool:
    """Whether ``text`` looks like a Triton ``config.pbtxt`` (a file of that name is always tried)."""
    return _SNIFF.search(text) is not None


def is_triton_name(name: str) -> bool:
    return name == "config.pbtxt"


def parse_pbtxt(text: str, display: str) -> SourceDoc:
    """Parse protobuf text format into a positioned document; syntax errors are InputErrors."""
    try:
        from google.protobuf import text_format
    except ImportError:
        raise InputError(display, "reading a Triton config.pbtxt needs the protobuf package "
                                  "(pip install protobuf)") from None

    parser = _Parser(text, display)
    try:
        root = parser.root()
    except text_format.ParseError as exc:
        line, col, _ = parser._at(exc.GetLine(), exc.GetColumn())
        raise InputError(display, f"invalid protobuf text format: {_reason(exc, parser.lines)}", line, col) from None
    data = parser.build(root, "", None)
    return SourceDoc(display, "pbtxt", data, parser.positions, text, templated=parser.templated,
                     template_spans=tuple(parser.template_spans))


def _quoted_end(text: str, start: int) -> int:
    """The end of the one-line quoted string that starts at ``start`` (``start + 1`` when it does
    not close on its line). Stepped escape by escape: the repeated alternation this replaces kept
    a backtracking entry per character (480 MB for a 4 MB string)."""
    stop = _QUOTED_STOP[text[start]]
    i = start + 1
    while True:
        m = stop.search(text, i)
        if m is None or m.group() == "\n":
            return start + 1
        if m.group() != "\\":
            return m.end()
        if text[m.end():m.end() + 1] in ("", "\n"):  # a backslash escapes no line break
            return start + 1
        i = m.end() + 1


def _token_at(tok: text_format.Tokenizer, previous: bool = False) -> tuple[int, int]:
    """1-based line and column of the tokenizer's current token (or of the one consumed last).

    protobuf keeps them only in private attributes of ``text_format.Tokenizer`` (0-based: the
    values its public ``ParseError()`` / ``ParseErrorPreviousToken()`` report, +1). Building one of
    those errors per token would copy the token's whole line each time (quadratic on a one-line
    file), so the attributes are read here, and only here; tests/test_triton_loader.py pins them."""
    if previous:
        return tok._previous_line + 1, tok._previous_column + 1
    return tok._line + 1, tok._column + 1


def _reason(exc: text_format.ParseError, lines: list[str]) -> str:
    """The tokenizer's message without its "line:col : 'the whole line': " prefix."""
    message = str(exc)
    line, col = exc.GetLine(), exc.GetColumn()
    for current in ([lines[line - 1]] if 0 < line <= len(lines) else []) + [""]:
        prefix = f"{line}:{col} : '{current}': "
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


class _Node:
    """A value as parsed, before pointers are known: a scalar, a ``[...]`` list, or a message
    whose ``entries`` are (field name, key span, node) in file order."""

    __slots__ = ("kind", "value", "pos", "templated")

    def __init__(self, kind: str, value: Any, pos: Pos, templated: bool = False):
        self.kind, self.value, self.pos, self.templated = kind, value, pos, templated


KeySpan = tuple[int, int, int, int]  # line, col, start, end


class _Parser:
    def __init__(self, text: str, display: str):
        from google.protobuf import text_format

        self.text = text
        self.display = display
        self.index = LineIndex(text)
        # Lines end at "\n" only, as in LineIndex (str.splitlines also splits at \r, \x0c, \x1c,
        # \u2028 ..., which would shift the tokenizer's line numbers against the text's).
        parts = text.split("\n")
        self.lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        self.tok = text_format.Tokenizer(self.lines)
        self.parse_error = text_format.ParseError
        self.positions: dict[str, Pos] = {}
        self.templated: set[str] = set()
        self.template_spans: list[tuple[int, int]] = []

    # --- reading -------------------------------------------------------------------------------
    def _here(self) -> tuple[int, int, int]:
        """Line, column and offset of the current token (at the end: of the end of the text)."""
        return self._at(*_token_at(self.tok))

    def _at(self, line: int, col: int) -> tuple[int, int, int]:
        offset = min(self.index.offset(line, col), len(self.text))
        if offset == len(self.text):  # the tokenizer puts the end after the last line's newline
            line, col = self.index.linecol(offset)
        return line, col, offset

    def _error(self, message: str, line: int | None = None, col: int | None = None) -> InputError:
        if line is None:
            line, col, _ = self._here()
        return InputError(self.display, f"invalid protobuf text format: {message}", line, col)

    def root(self) -> _Node:
        entries = self._fields(None, 0)
        return _Node(_KIND_MESSAGE, entries, Pos(1, 1, start=0, end=len(self.text), style="block"))

    def _fields(self, close: tuple[str, int, int] | None, depth: int) -> list[tuple[str, KeySpan, _Node]]:
        """Fields up to ``close`` (the closing token and where its message opened) or the end."""
        tok = self.tok
        entries: list[tuple[str, KeySpan, _Node]] = []
        while True:
            if close is not None and tok.token == close[0]:
                return entries
            if tok.AtEnd():
                if close is None:
                    return entries
                raise self._error(f"expected '{close[0]}' to close the message opened at {close[1]}:{close[2]}, "
                                  "found the end of the file")
            if close is not None and tok.token in ("}", ">"):
                raise self._error(f"expected '{close[0]}' to close the message opened at {close[1]}:{close[2]}, "
                                  f"found '{tok.token}'")
            if tok.token == "[":
                raise self._error("extension and Any fields ([...]) are not supported in a Triton model config")
            if close is None and tok.token in ("}", ">"):
                raise self._error(f"unexpected '{tok.token}': no message is open")
            line, col, start = self._here()
            name = tok.ConsumeIdentifier()
            key = (line, col, start, start + len(name))
            colon = tok.TryConsume(":")
            if tok.token in ("{", "<"):
                node = self._message(depth + 1)
            elif tok.token == "[":  # `input [ {...}, {...} ]`: the colon is optional before messages
                node = self._list(depth + 1, messages_only=not colon)
            elif colon:
                node = self._scalar()
            else:
                found = repr(tok.token) if tok.token else "the end of the file"
                raise self._error(f"expected ':' or '{{' after {name!r}, found {found}")
            entries.append((name, key, node))
            if not tok.TryConsume(","):
                tok.TryConsume(";")

    def _check_depth(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self._error(f"nested deeper than {MAX_DEPTH} levels")

    def _message(self, depth: int) -> _Node:
        self._check_depth(depth)
        tok = self.tok
        line, col, start = self._here()
        close = "}" if tok.token == "{" else ">"
        tok.NextToken()
        entries = self._fields((close, line, col), depth)
        end = self._here()[2] + 1
        tok.NextToken()
        return _Node(_KIND_MESSAGE, entries, Pos(line, col, start=start, end=end, style="flow"))

    def _list(self, depth: int, messages_only: bool) -> _Node:
        self._check_depth(depth)
        tok = self.tok
        line, col, start = self._here()
        tok.NextToken()  # '['
        items: list[_Node] = []
        if not tok.TryConsume("]"):
            while True:
                if tok.AtEnd():
                    raise self._error(f"expected ']' to close the list opened at {line}:{col}, "
                                      "found the end of the file")
                if tok.token in ("{", "<"):
                    items.append(self._message(depth + 1))
                elif messages_only:
                    raise self._error(f"expected ':' before a list of values (only a list of messages may omit it), "
                                      f"found {tok.token!r}", line, col)
                else:
                    items.append(self._scalar())
                if tok.TryConsume("]"):
                    break
                if not tok.AtEnd():
                    tok.Consume(",")
        end = self.index.offset(*_token_at(tok, previous=True)) + 1
        return _Node(_KIND_LIST, items, Pos(line, col, start=start, end=end, style="flow"))

    def _scalar(self) -> _Node:
        tok = self.tok
        line, col, start = self._here()
        token = tok.token
        if not token or token in ("{", "<", "[", "]", "}", ">", ":", ",", ";"):
            raise self._error(f"expected a value, found {repr(token) if token else 'the end of the file'}")
        if token[:1] in ("'", '"'):
            try:
                value = tok.ConsumeString()  # adjacent strings concatenate ("a" "b"), as in protobuf
            except self.parse_error as exc:  # reported where the string starts
                raise self._error(_reason(exc, self.lines), line, col) from None
            last = self.index.offset(*_token_at(tok, previous=True))
            end = _quoted_end(self.text, last)
            style: str | None = token[0]
        elif token == "$":
            m = _BARE_PLACEHOLDER.match(self.text, start)
            if not m:
                raise self._error("unexpected '$' (a fill_template.py placeholder is written ${name})")
            end = m.end()
            while not tok.AtEnd() and self._here()[2] < end:
                tok.NextToken()
            value, style = m.group(), None
        elif token[:1].isdigit() or token[:1] in "+-.":
            try:
                value = tok.ConsumeInteger()
            except self.parse_error:
                value = tok.ConsumeFloat()
            end, style = start + len(token), None
        elif token in ("true", "True", "false", "False"):
            value = tok.ConsumeBool()
            end, style = start + len(token), None
        else:
            value = tok.ConsumeIdentifier()  # enum values: TYPE_INT32, KIND_GPU, ...
            end, style = start + len(token), None
        templated = triton_fw.has_placeholder(self.text[start:end])
        if templated:
            self.template_spans += [(start + m.start(), start + m.end())
                                    for m in triton_fw.PLACEHOLDER.finditer(self.text[start:end])]
        return _Node(_KIND_SCALAR, value, Pos(line, col, start=start, end=end, style=style), templated)

    # --- building data and positions -----------------------------------------------------------
    def _record(self, pointer: str, pos: Pos, key: KeySpan | None) -> None:
        if key is not None:
            pos = pos._replace(key_line=key[0], key_col=key[1], key_start=key[2], key_end=key[3])
        self.positions[pointer] = pos

    def build(self, node: _Node, pointer: str, key: KeySpan | None) -> Any:
        self._record(pointer, node.pos, key)
        if node.kind == _KIND_SCALAR:
            if node.templated:
                self.templated.add(pointer)
            return node.value
        if node.kind == _KIND_LIST:
            return [self.build(item, join_pointer(pointer, i), None) for i, item in enumerate(node.value)]
        groups: dict[str, list[tuple[KeySpan, _Node]]] = {}
        for name, span, child in node.value:
            groups.setdefault(name, []).append((span, child))
        out: dict[str, Any] = {}
        for name, entries in groups.items():
            ptr = join_pointer(pointer, name)
            if pointer == "" and name in triton_fw.SINGULAR_TOP and len(entries) > 1:
                first, again = entries[0][0], entries[1][0]
                raise InputError(self.display, f"invalid protobuf text format: non-repeated field {name!r} is "
                                 f"specified multiple times (first at {first[0]}:{first[1]})", again[0], again[1])
            items: list[tuple[KeySpan | None, _Node]] = []
            for span, child in entries:  # `f: [a, b]` items have no key of their own
                items += [(None, item) for item in child.value] if child.kind == _KIND_LIST else [(span, child)]
            if name in triton_fw.STRING_MAPS:
                mapping = self._as_map([item for _, item in items])
                if mapping is not None:
                    out[name] = self._build_map(mapping, ptr, entries)
                    continue
            repeated = name in triton_fw.REPEATED or name in triton_fw.STRING_MAPS  # a map is repeated entries
            if len(entries) == 1 and not (repeated and entries[0][1].kind != _KIND_LIST):
                out[name] = self.build(entries[0][1], ptr, entries[0][0])
                continue
            self._record(ptr, self._span(entries, "block"), entries[0][0])
            out[name] = [self.build(item, join_pointer(ptr, i), span) for i, (span, item) in enumerate(items)]
        return out

    @staticmethod
    def _span(entries: list[tuple[KeySpan, _Node]], style: str) -> Pos:
        first, last = entries[0][1].pos, entries[-1][1].pos
        return Pos(first.line, first.col, start=first.start, end=last.end, style=style)

    @staticmethod
    def _as_map(items: list[_Node]) -> list[tuple[_Node, _Node]] | None:
        """(key node, string value node) of each map entry, or None when these are not string-map
        entries (``key: "k" value: "v"`` or ``key: "k" value: { string_value: "v" }``)."""
        out = []
        for item in items:
            if item.kind != _KIND_MESSAGE:
                return None
            fields = {name: child for name, _, child in item.value}
            if len(fields) != len(item.value) or set(fields) - {"key", "value"} or "key" not in fields:
                return None
            key = fields["key"]
            if key.kind != _KIND_SCALAR or not isinstance(key.value, str):
                return None
            value = fields.get("value")
            if value is not None and value.kind == _KIND_MESSAGE:  # ModelParameter
                inner = {name: child for name, _, child in value.value}
                if set(inner) - {"string_value"}:
                    return None
                value = inner.get("string_value", _Node(_KIND_SCALAR, "", value.pos._replace(style="flow")))
            if value is None:  # an entry without a value: the empty string (proto3 default)
                value = _Node(_KIND_SCALAR, "", key.pos._replace(start=-1, end=-1, style=None))
            if value.kind != _KIND_SCALAR or not isinstance(value.value, str):
                return None
            out.append((key, value))
        return out

    def _build_map(self, mapping: list[tuple[_Node, _Node]], pointer: str,
                   entries: list[tuple[KeySpan, _Node]]) -> dict[str, str]:
        self._record(pointer, self._span(entries, "block"), entries[0][0])
        out: dict[str, str] = {}
        for key, value in mapping:  # a key written twice: the last one counts, as in protobuf
            k = key.pos
            out[key.value] = self.build(value, join_pointer(pointer, key.value), (k.line, k.col, k.start, k.end))
        return out


# --- plans ---------------------------------------------------------------------------------------
def _text(data: dict, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def is_tensorrtllm(data: Any) -> bool:
    """Whether a parsed config.pbtxt is a model the TensorRT-LLM C++ backend serves."""
    if not isinstance(data, dict):
        return False
    return _text(data, "backend") in triton_fw.BACKENDS or _text(data, "platform") in triton_fw.PLATFORMS


def model_name(doc: SourceDoc) -> str:
    """The ``name`` field, else what Triton uses: the model's folder (``<repo>/<model>/config.pbtxt``)."""
    name = _text(doc.data, "name") if isinstance(doc.data, dict) else None
    if name:
        return name
    path = PurePath(doc.path)
    return path.parent.name if path.name == "config.pbtxt" and path.parent.name else path.stem


def plans(doc: SourceDoc) -> list[Plan]:
    """One Plan for a tensorrtllm model: its ``parameters`` (keys as written) and
    ``max_batch_size``; other models (python, ensemble, ...) give none (see :func:`why_not`)."""
    if not is_tensorrtllm(doc.data):
        return []
    data = doc.data
    settings: dict[str, Setting] = {}
    if "max_batch_size" in data:
        settings["max_batch_size"] = _setting(doc, "max_batch_size", "/max_batch_size", data["max_batch_size"])
    parameters = data.get("parameters")
    if isinstance(parameters, dict):
        for key, raw in parameters.items():
            settings[key] = _setting(doc, key, join_pointer("/parameters", key), raw)
    anchor_at = "/backend" if "backend" in data else "/platform"
    return [Plan(
        framework="trtllm",
        kind="triton-pbtxt",
        label=f"Triton model {model_name(doc)} (tensorrtllm backend)",
        file=doc.path,
        anchor=Provenance.at(doc, anchor_at),
        settings=settings,
        doc=doc,
        entry="triton tensorrtllm backend",
    )]


def _setting(doc: SourceDoc, key: str, pointer: str, raw: Any) -> Setting:
    templated = pointer in doc.templated
    value = raw
    if isinstance(raw, str) and not templated:
        try:
            value = triton_fw.convert(key, raw)
        except ValueError:
            value = raw  # the backend warns and keeps its default; rules see the string as written
    return Setting(key=key, raw_key=key, value=value, raw=raw, prov=Provenance.at(doc, pointer, key=False),
                   templated=templated, site=Site("pbtxt", doc, pointer))


def why_not(doc: SourceDoc) -> str:
    """Why a parsed config.pbtxt gives no plan ("" when it gives one)."""
    data = doc.data
    if not isinstance(data, dict) or not data:
        return "an empty Triton config.pbtxt"
    if is_tensorrtllm(data):
        return ""
    backend, platform = _text(data, "backend"), _text(data, "platform")
    if platform == "ensemble":
        scheduling = data.get("ensemble_scheduling")
        steps = scheduling.get("step") if isinstance(scheduling, dict) else None
        names = [s["model_name"] for s in steps or [] if isinstance(s, dict) and isinstance(s.get("model_name"), str)]
        listed = f" of {', '.join(names)}" if names else ""
        return f"a Triton ensemble{listed}; the tensorrtllm model's own config.pbtxt holds its settings"
    for field, value in (("backend", backend), ("platform", platform)):
        if value is not None and triton_fw.has_placeholder(value):
            return (f"a Triton config.pbtxt whose {field} is still the placeholder {value}; "
                    "fill it with tools/fill_template.py")
    if backend is not None:
        return f"a Triton config.pbtxt, but its backend is {backend}, not tensorrtllm"
    if platform is not None:
        return f"a Triton config.pbtxt, but its platform is {platform}, not tensorrtllm"
    return "a Triton config.pbtxt with neither backend nor platform"
