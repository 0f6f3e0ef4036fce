"""Reading config files safely into positioned documents.

A :class:`SourceDoc` is one parsed JSON or YAML document plus a table from JSON Pointer to where
the key and the value sit: line and column for display, and start/end offsets into the text so
that a fix can replace exactly those characters. Offsets count characters of the decoded text
(a UTF-8 byte-order mark, if the file had one, is not part of the text and is written back by
the fixer). Reading refuses what a config never is (binary, non-UTF-8, oversized,
merge-conflicted) with an :class:`InputError` that names the line and column.
"""

import bisect
import os
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from sits_doctor.errors import InputError

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 200_000

_CONFLICT = re.compile(r"^(<<<<<<<|=======|>>>>>>>)( |$)", re.MULTILINE)


class Pos(NamedTuple):
    """Where a value (and its key, if any) sits: 1-based line/column for display, and ``[start,
    end)`` character offsets into the document text for edits (-1 when unknown).

    ``style`` is how the value is written: for scalars ``None`` (plain), ``'"'``, ``"'"``,
    ``"|"`` or ``">"``; for collections ``"flow"`` (``[a, b]``, ``{a: 1}``, all of JSON) or
    ``"block"``.
    """

    line: int
    col: int
    key_line: int | None = None
    key_col: int | None = None
    start: int = -1
    end: int = -1
    key_start: int = -1
    key_end: int = -1
    style: str | None = None


class SourceDoc:
    """One document of one file: its data (plain dicts/lists/scalars) and positions by pointer.

    (A plain class, like the other containers the static check builds: ``dataclasses`` imports
    ``inspect``, several milliseconds of every run; bench/results/cli_speed.md.)"""

    def __init__(self, path: str, fmt: str, data: Any, positions: dict[str, Pos], text: str, index: int = 0,
                 templated: set[str] | None = None, derived: dict[str, Any] | None = None,
                 template_spans: tuple[tuple[int, int], ...] = (), shared: set[str] | None = None):
        self.path = path
        self.fmt = fmt  # "json" | "yaml"
        self.data = data
        self.positions = positions
        self.text = text
        self.index = index  # document number in a multi-document YAML file
        self.templated = set() if templated is None else templated  # pointers whose value came from {{ }}
        self.derived = {} if derived is None else derived  # per-document results rules share
        self.template_spans = template_spans  # where Helm {{ }} actions sit in ``text``
        self.shared = set() if shared is None else shared  # pointers of YAML nodes reached through an alias or a merge

    def __repr__(self) -> str:
        return f"SourceDoc({self.path!r}, {self.fmt!r}, index={self.index})"

    def is_shared(self, pointer: str) -> bool:
        """Whether the node at ``pointer`` (or one above it) is written once and used several
        times (a YAML anchor and its aliases, or a ``<<`` merge): editing it edits every use."""
        p = pointer
        while True:
            if p in self.shared:
                return True
            if not p:
                return False
            p = p.rsplit("/", 1)[0]

    def touches_template(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` overlaps a ``{{ }}`` action (an edit there would break it)."""
        return any(s < end and start < e for s, e in self.template_spans)

    @cached_property
    def lines(self) -> "LineIndex":
        return LineIndex(self.text)

    def pos(self, pointer: str) -> Pos:
        """Position of the value at ``pointer``, or of the nearest ancestor that exists."""
        p = pointer
        while True:
            if p in self.positions:
                return self.positions[p]
            if not p:
                return Pos(1, 1)
            p = p.rsplit("/", 1)[0]


def escape_token(token: str | int) -> str:
    token = str(token)
    if "~" not in token and "/" not in token:  # nearly every key: nothing to escape
        return token
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(base: str, token: str | int) -> str:
    return f"{base}/{escape_token(token)}"


class LineIndex:
    """Offset ↔ (line, col) conversion, both 1-based."""

    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def linecol(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i + 1, offset - self.starts[i] + 1

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col - 1


def display_path(path: Path) -> str:
    """The path as the user will read it: relative to the working directory when inside it."""
    path = os.fspath(path)
    cwd = os.getcwd()
    folder, name = os.path.split(path)
    if name not in ("", ".", ".."):
        inside, shown = _relative(folder or ".", cwd)  # the files of one folder share the work
        if inside:
            return name if shown == "." else os.path.join(shown, name)
    inside, shown = _relative(path, cwd)
    return shown if inside else path


@lru_cache(maxsize=1024)
def _relative(path: str, cwd: str) -> tuple[bool, str]:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return False, path
    return not rel.startswith(".."), rel


CONFIG_FILE = "a config file"


def read_input(path: Path | str, display: str, *, what: str = CONFIG_FILE, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of an input file, read the one way every input is read: checked files, settings
    files (``pyproject.toml`` too), ignore and baseline files, a model's sidecars.

    Only regular files: a FIFO, socket or device is refused without being opened for a blocking
    read (``stat`` first; then the file is opened non-blocking and the opened descriptor is
    checked again, so a file swapped for a FIFO between the two cannot hang the run). Never more
    than ``limit`` bytes, whatever ``stat`` says (``/dev/zero`` and ``/proc`` files report 0, a
    sparse file reports what it will read). ``what`` names the kind of file in the messages."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise InputError(display, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    _refuse_irregular(info.st_mode, display, what)
    question = "; is this really a config?" if what == CONFIG_FILE else ""
    too_big = f"over the {limit / 2**20:g} MiB limit for {what}{question}"
    if info.st_size > limit:
        raise InputError(display, f"file is {info.st_size / 2**20:.1f} MiB, {too_big}")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(display, f"cannot read: {exc.strerror or exc}") from None
    try:
        _refuse_irregular(os.fstat(fd).st_mode, display, what)  # what was opened, not what was looked at
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(display, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise InputError(display, f"file grew past the limit while being read: {too_big}")
    return b"".join(chunks)


def _refuse_irregular(mode: int, display: str, what: str) -> None:
    import stat

    if not stat.S_ISREG(mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a directory" if stat.S_ISDIR(mode) else "not a regular file")
        raise InputError(display, f"cannot read: {kind}, not {what}")


def read_text(path: Path | str, display: str, *, what: str = CONFIG_FILE) -> str:
    """Read a file as UTF-8 text (:func:`read_input`, then :func:`decode_text`), refusing
    binary, oversized, non-UTF-8 and conflicted files and anything but a regular file.

    A UTF-8 byte-order mark is dropped (the fixer keeps it when it writes the file back)."""
    return decode_text(read_input(path, display, what=what), display)


def read_stream(stream, display: str) -> str:
    """Read standard input (a binary stream) as :func:`read_text` reads a file: at most the size
    limit, UTF-8 only, no binary."""
    try:
        raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(display, f"cannot read standard input: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(display, f"standard input is over the {MAX_FILE_BYTES // 2**20} MiB limit for a config file")
    return decode_text(raw, display)


def decode_text(raw: bytes, display: str) -> str:
    """Bytes of a config as text: UTF-8 (a byte-order mark dropped); UTF-16, binary, invalid
    UTF-8 and git conflict markers refused."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(display, "file is UTF-16 encoded; save it as UTF-8")
    if b"\x00" in raw[:8192]:
        raise InputError(display, "binary file (contains NUL bytes), not a text config")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = raw[: exc.start].decode("utf-8", errors="replace")
        line, col = LineIndex(prefix).linecol(len(prefix))
        raise InputError(
            display, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", line, col
        ) from None
    m = _CONFLICT.search(text)
    if m:
        line, _ = LineIndex(text).linecol(m.start())
        raise InputError(display, f"unresolved git merge-conflict marker '{m.group(1)}'", line, 1)
    return text


def parse_json(text: str, display: str) -> SourceDoc:
    """Parse JSON, with positions for every pointer; duplicate keys and deep nesting are errors."""
    import json

    check_json_shape(text, display)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(display, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise InputError(display, f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # an integer longer than Python's int-string limit (4300 digits)
        raise InputError(display, "invalid JSON: a number has more digits than any config value could") from None
    positions = _JsonIndexer(text, display).run()
    return SourceDoc(display, "json", data, positions, text)


# What json.loads is never given unchecked: its C scanner recurses per nesting level, and each
# value it returns becomes a positioned node here (a 10 MiB array of 5 M numbers is gigabytes).
_JSON_ESCAPE = re.compile(r"\\.")  # a backslash and the character it escapes
_JSON_TOKEN = re.compile(r'"[^"]*"|[\[\]{},]|"')  # with escapes masked, a string holds no quote


def check_json_shape(text: str, display: str, max_nodes: int | None = MAX_NODES) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH or holding more than ``max_nodes`` values (one
    per container and one per comma: about one per value), at the line and column where the
    limit is passed, before ``json.loads`` sees it.

    Linear in the text: escapes are masked first, two characters for two (so offsets stay), so a
    string is a quote, non-quotes and a quote, which no pattern here scans twice. Scanning stops
    where the text stops being JSON (an unterminated string, a close without an open): the
    parser reports that place itself, and reads nothing past it."""
    masked = _JSON_ESCAPE.sub("__", text) if "\\" in text else text
    depth = nodes = 0
    for m in _JSON_TOKEN.finditer(masked):
        c = masked[m.start()]
        if c == '"':
            if m.end() - m.start() == 1:  # a quote that never closes
                return
            continue
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(display, f"nested deeper than {MAX_DEPTH} levels", *LineIndex(text).linecol(m.start()))
        elif c in "]}":
            depth -= 1
            if depth < 0:
                return
            continue
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            raise InputError(display, f"more than {max_nodes} values in one document (a config holds far fewer); "
                                      "refusing", *LineIndex(text).linecol(m.start()))


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class _JsonIndexer:
    """Walks JSON text that ``json.loads`` already accepted, recording where each value sits."""

    def __init__(self, text: str, display: str):
        self.text = text
        self.display = display
        self.lines = LineIndex(text)
        self.positions: dict[str, Pos] = {}

    def run(self) -> dict[str, Pos]:
        from json.decoder import scanstring

        self.scanstring = scanstring
        i = _WS.match(self.text, 0).end()
        self._value(i, "", None)
        return self.positions

    def _skip(self, i: int) -> int:
        return _WS.match(self.text, i).end()

    def _value(self, i: int, pointer: str, key: tuple[int, int] | None) -> int:
        c = self.text[i]
        if c == "{":
            end = self._object(i + 1, pointer)
        elif c == "[":
            end = self._array(i + 1, pointer)
        elif c == '"':
            end = self.scanstring(self.text, i + 1)[1]
        else:
            for word in ("true", "false", "null", "NaN", "Infinity", "-Infinity"):
                if self.text.startswith(word, i):
                    end = i + len(word)
                    break
            else:
                end = _NUMBER.match(self.text, i).end()
        line, col = self.lines.linecol(i)
        style = "flow" if c in "{[" else ('"' if c == '"' else None)
        if key is None:
            self.positions[pointer] = Pos(line, col, start=i, end=end, style=style)
        else:
            kl, kc = self.lines.linecol(key[0])
            self.positions[pointer] = Pos(line, col, kl, kc, i, end, key[0], key[1], style)
        return end

    def _object(self, i: int, pointer: str) -> int:
        seen: set[str] = set()
        i = self._skip(i)
        if self.text[i] == "}":
            return i + 1
        while True:
            key_at = i
            key, i = self.scanstring(self.text, i + 1)
            if key in seen:
                line, col = self.lines.linecol(key_at)
                raise InputError(self.display, f"duplicate key {key!r}", line, col)
            seen.add(key)
            key_span = (key_at, i)
            i = self._skip(self._skip(i) + 1)  # past ':'
            i = self._skip(self._value(i, join_pointer(pointer, key), key_span))
            if self.text[i] == "}":
                return i + 1
            i = self._skip(i + 1)  # past ','

    def _array(self, i: int, pointer: str) -> int:
        i = self._skip(i)
        if self.text[i] == "]":
            return i + 1
        n = 0
        while True:
            i = self._skip(self._value(i, join_pointer(pointer, n), None))
            n += 1
            if self.text[i] == "]":
                return i + 1
            i = self._skip(i + 1)
