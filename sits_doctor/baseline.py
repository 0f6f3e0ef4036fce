"""Baseline files: accept the findings a project already has, report only new ones.

``sits-doctor check --write-baseline FILE`` records today's findings; ``--baseline FILE`` hides
the findings recorded there and lists the entries that no longer match anything (stale: prune
them). Like SARIF fingerprints, an entry is keyed by what the finding is about, never by where
it sits in the file: the rule code, the file's path relative to a root (the baseline's folder),
the JSON Pointer of the value, and a short hash of that value. Lines can move (a comment added
above) without invalidating the baseline; changing the value makes the finding new again. An
option written as command-line words (an ``args`` list, an ``sh -c`` string, a script) is keyed
by the command's pointer and the option's own words (``--swap-space 4``), so editing another flag
of the same command leaves it baselined.

An entry carries a ``count``: two findings with the same key (identical documents in one
multi-document file) need two matches. Messages are stored for the humans who read the file;
matching ignores them.

Pure functions: reading files is left to the ``docs_of`` callable the caller passes in (it
should cache: every finding of a file asks for the same documents).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from sits_doctor.errors import InputError
from sits_doctor.redact import redact

VERSION = 1
HASH_CHARS = 16
ABSENT = "<absent>"  # what is hashed when the pointer names no value (a missing key's parent)

DocsOf = Callable[[str], Sequence[Any]]  # display path -> its SourceDocs (each with .index, .data)


class BaselineKey(NamedTuple):
    code: str
    path: str  # relative to the root, POSIX separators
    pointer: str
    hash: str  # first HASH_CHARS hex digits of sha256(canonical JSON of the value)


@dataclass(frozen=True)
class BaselineEntry:
    key: BaselineKey
    count: int
    message: str


@dataclass(frozen=True)
class Baseline:
    entries: tuple[BaselineEntry, ...]
    source: str = ""  # the file it was loaded from, as given

    def filter(self, findings: Iterable[Any], root: Path, docs_of: DocsOf) -> tuple[list, int, list[BaselineEntry]]:
        """Split ``findings`` into the new ones and the recorded ones.

        Returns ``(kept, matched, stale)``: the findings no entry accounts for (in their order),
        how many findings the entries absorbed, and the entries that matched nothing. An entry
        absorbs at most ``count`` findings; the rest of its key are new.
        """
        left: Counter[BaselineKey] = Counter()
        for e in self.entries:
            left[e.key] += e.count
        total = dict(left)
        kept: list = []
        matched = 0
        for finding in findings:
            key = entry_key(finding, root, docs_of)
            if left.get(key, 0) > 0:
                left[key] -= 1
                matched += 1
            else:
                kept.append(finding)
        stale = [e for e in self.entries if left[e.key] == total[e.key]]
        return kept, matched, stale


def docs_reader() -> DocsOf:
    """A ``docs_of`` that reads each file once, through the loaders, and remembers it."""
    from sits_doctor.loaders import read_docs

    cache: dict[str, Sequence[Any]] = {}

    def docs_of(file: str) -> Sequence[Any]:
        if file not in cache:
            cache[file] = read_docs(Path(file), file)
        return cache[file]

    return docs_of


def entry_key(finding: Any, root: Path, docs_of: DocsOf) -> BaselineKey:
    """The line-independent identity of a finding: (code, path from ``root``, pointer, value hash)."""
    loc = finding.location
    pointer, words = finding.identity()
    if words:  # an option among a command's words: its own words, not the whole command
        return BaselineKey(finding.code, relative_path(loc.file, root), pointer, value_hash(words))
    doc = next((d for d in docs_of(loc.file) if d.index == loc.doc_index), None)
    value = ABSENT if doc is None else _resolve(doc.data, loc.pointer)
    return BaselineKey(finding.code, relative_path(loc.file, root), loc.pointer, value_hash(value))


def value_hash(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:HASH_CHARS]


def relative_path(file: str, root: Path) -> str:
    """``file`` relative to ``root`` in POSIX form (``../`` when outside it; absolute across drives)."""
    target = Path(file).resolve()
    try:
        rel = os.path.relpath(target, Path(root).resolve())
    except ValueError:  # another drive (Windows)
        return target.as_posix()
    return Path(rel).as_posix()


def write(findings: Iterable[Any], root: Path, docs_of: DocsOf) -> str:
    """The text of a baseline file that accepts exactly ``findings``."""
    counts: Counter[BaselineKey] = Counter()
    messages: dict[BaselineKey, str] = {}
    for finding in findings:
        key = entry_key(finding, root, docs_of)
        counts[key] += 1
        messages[key] = min(messages.get(key, finding.message), finding.message)
    entries = [  # the messages are for people reading the file (it is committed): secrets redacted
        {"code": k.code, "path": k.path, "pointer": k.pointer, "hash": k.hash, "count": counts[k],
         "message": redact(messages[k])}
        for k in sorted(counts, key=_order)
    ]
    return json.dumps({"version": VERSION, "entries": entries}, indent=2, ensure_ascii=False) + "\n"


def write_file(target: str, findings: Sequence[Any], docs_of: DocsOf, inputs: Iterable[str]) -> int:
    """Write the baseline of ``findings`` to ``target`` (paths in it relative to its folder) and
    return how many findings it records. Refused when ``target`` is one of the ``inputs`` (a file
    being checked); written through a temporary file in the same folder and renamed, so a failed
    write leaves the old baseline whole. Either failure is an :class:`InputError`."""
    from sits_doctor.outputs import overwrites_input

    if overwrites_input(target, inputs):
        raise InputError(target, "refusing to write the baseline over a file being checked")
    path = Path(target).resolve()  # a symlink is written through, as before
    text = write(findings, path.parent, docs_of)
    tmp = None
    try:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise InputError(target, f"cannot write the baseline: {exc.strerror or exc}") from None
    return len(findings)


def load(path: str | Path) -> Baseline:
    """Read a baseline file; anything unusable is an :class:`InputError` with line:col where known."""
    from sits_doctor.source import check_json_shape, read_text

    shown = str(path)
    text = read_text(path, shown, what="a baseline file")
    check_json_shape(text, shown, max_nodes=None)  # deep nesting is refused; json.loads takes 10 MiB in well under a second
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(shown, f"invalid JSON in the baseline: {exc.msg}", exc.lineno, exc.colno) from None
    except ValueError:  # an integer longer than Python's int-string limit
        raise InputError(shown, "invalid JSON in the baseline: a number has more digits than a count could") from None
    if not isinstance(data, dict):
        raise InputError(shown, "a baseline is a JSON object with 'version' and 'entries'", *_linecol(text, _skip_ws(text, 0)))
    if data.get("version") != VERSION:
        raise InputError(shown, f"unsupported baseline version {data.get('version')!r} (this sits-doctor reads {VERSION}); "
                                "write a new one with --write-baseline")
    raw = data.get("entries")
    if not isinstance(raw, list):
        raise InputError(shown, "'entries' must be a list")
    starts = _item_offsets(text)
    entries = []
    for i, item in enumerate(raw):
        problem = _entry_problem(item)
        if problem:
            where = _linecol(text, starts[i]) if i < len(starts) else (None, None)
            raise InputError(shown, f"baseline entry {i + 1}: {problem}", *where)
        key = BaselineKey(item["code"], item["path"], item["pointer"], item["hash"])
        entries.append(BaselineEntry(key, item.get("count", 1), item.get("message", "")))
    return Baseline(tuple(entries), shown)


def _entry_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "must be an object"
    for name in ("code", "path", "pointer", "hash"):
        if not isinstance(item.get(name), str):
            return f"'{name}' must be a string" if name in item else f"'{name}' is missing"
    count = item.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return f"'count' must be a whole number ≥ 1, not {count!r}"
    if not isinstance(item.get("message", ""), str):
        return "'message' must be a string"
    return None


def _order(key: BaselineKey) -> tuple[str, str, str, str]:
    return (key.path, key.code, key.pointer, key.hash)


def _resolve(data: Any, pointer: str) -> Any:
    """The value at a JSON Pointer (RFC 6901), or ABSENT."""
    if pointer == "":
        return data
    node = data
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return ABSENT
    return node


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _item_offsets(text: str) -> list[int]:
    """Offsets of the items of the top-level ``entries`` array of JSON text ``json.loads`` took."""
    decoder = json.JSONDecoder()
    i = _skip_ws(text, 0) + 1  # past '{'
    while True:
        i = _skip_ws(text, i)
        if text[i] == "}":
            return []
        key, i = json.decoder.scanstring(text, i + 1)
        i = _skip_ws(text, _skip_ws(text, i) + 1)  # past ':'
        if key == "entries":
            break
        i = _skip_ws(text, decoder.raw_decode(text, i)[1])
        if text[i] == ",":
            i += 1
    offsets: list[int] = []
    i = _skip_ws(text, i + 1)  # past '['
    while text[i] != "]":
        offsets.append(i)
        i = _skip_ws(text, decoder.raw_decode(text, i)[1])
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
    return offsets


def _linecol(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
