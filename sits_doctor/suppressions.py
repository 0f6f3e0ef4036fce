"""Suppressions: findings a person has looked at and accepted, each with a reason.

Two ways to write one:

- **Inline, in YAML**: ``# sits-doctor: ignore[SITS204] pinned to vLLM 0.8 until the upgrade``.
  Codes are comma-separated; a prefix (``SITS2``) covers every code that starts with it. The
  comment covers its own line when it follows code there, or, when it stands alone on its line,
  the next line that is not a comment (only comment lines may sit between: a blank line ends
  the block, and the comment then covers nothing). When the covered line starts a multi-line
  string (a ``|`` block, a quoted string over several lines), the comment covers the whole
  string: that is how a flag inside a Kubernetes ``sh -c`` script is suppressed.
- **In ``.sits-doctor-ignore.toml``**, for JSON (which has no comments) or any file you would
  rather not annotate: the closest such file in the checked file's folder or above it applies.
  Each ``[[ignore]]`` table has ``path`` (a glob relative to the toml's folder: ``*`` and ``?``
  stay within a folder, ``**/`` spans folders), ``pointer`` (a JSON Pointer; it covers that value
  and everything below it, ``""`` the whole document), ``code`` (a code or prefix), ``reason``,
  and optionally ``expires = 2027-01-31`` (a TOML date; from that day on the entry no longer
  suppresses and is reported as expired).

A suppression without a reason does not suppress. Problems are returned, never printed: a
suppression that suppressed nothing (ruff's RUF100), one without a reason, a malformed one, an
expired toml entry. The engine reports each as a SITS900 finding.

Why PyYAML's tokenizer finds the comments: PyYAML keeps no comments, but its scanner knows every
kind of YAML string (plain, quoted over several lines, ``|``/``>`` blocks) and yields tokens with
their offsets; whatever lies between two tokens is whitespace or comments, so a ``#`` there starts
a comment, and a ``#`` inside a string never does. It is the same grammar the loaders parse with,
so a comment here is a comment there, and it adds no dependency. A hand-written line scanner
would have to re-implement block-scalar indentation and multi-line quoting; ruamel.yaml's
round-trip loader would add a dependency to the static path and hangs comments on the preceding
node (or on the parent, above a first key) in shapes that are hard to map back to lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from sits_doctor.errors import InputError
from sits_doctor.source import LineIndex

IGNORE_FILE = ".sits-doctor-ignore.toml"
SYNTAX = "# sits-doctor: ignore[CODE, ...] reason"
CODE = re.compile(r"SITS\d{1,3}")
_MENTION = re.compile(r"#\s*sits-doctor(?:\s*:|\s+ignore\b)", re.IGNORECASE)  # meant as a directive
_DIRECTIVE = re.compile(r"#\s*sits-doctor:\s*ignore\[(?P<codes>[^\]]*)\](?P<reason>.*)")
_REASON_LEAD = " \t:-–—"
_BLOCK_HEADER_COMMENT = re.compile(r"[|>][-+0-9]*[ \t]+(#.*)")
_ENTRY_KEYS = ("path", "pointer", "code", "reason", "expires")


@dataclass(frozen=True)
class Problem:
    """Something wrong with a suppression, at the comment or the toml entry that holds it."""

    file: str
    line: int
    col: int
    message: str
    kind: str  # unused | no-reason | malformed | expired | unreadable


@dataclass
class SuppressionResult:
    kept: list = field(default_factory=list)  # findings still reported
    suppressed: list = field(default_factory=list)  # findings a suppression accepted
    problems: list[Problem] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)  # unusable .sits-doctor-ignore.toml files


@dataclass(frozen=True)
class Comment:
    line: int  # 1-based
    col: int  # 1-based column of its '#'
    text: str  # from '#' to the end of the line
    alone: bool  # nothing but whitespace before it on its line


@dataclass(frozen=True)
class Directive:
    """A parsed ``# sits-doctor: ignore[...] reason`` comment."""

    line: int
    col: int
    codes: tuple[str, ...]
    reason: str
    covers: tuple[int, int] | None  # first and last covered line, or None: it covers nothing


@dataclass(frozen=True)
class IgnoreEntry:
    path: str
    pointer: str
    code: str
    reason: str
    expires: date | None
    line: int | None  # of its [[ignore]] header
    pattern: Glob = field(compare=False, repr=False)


@dataclass(frozen=True)
class IgnoreFile:
    path: Path
    shown: str
    entries: tuple[IgnoreEntry, ...]


def apply(findings: Iterable[Any], texts: Mapping[str, str], today: date) -> SuppressionResult:
    """Drop the suppressed findings and report what is wrong with the suppressions.

    ``texts`` maps the display path of every checked file to its text (files without findings
    too: their suppressions are judged unused). Inline comments are read from files not ending
    in ``.json``; ignore files are looked up for every file in ``texts`` and every finding.
    """
    result = SuppressionResult()
    inline: dict[str, list[Directive]] = {}
    for file in sorted(texts):
        if not file.lower().endswith(".json") and _MENTION.search(texts[file]):
            inline[file], problems = directives(texts[file], file)
            result.problems += problems
    folders: dict[Path, Path | None] = {}
    loaded: dict[Path, IgnoreFile | None] = {}
    findings = list(findings)

    def ignore_file(file: str) -> IgnoreFile | None:
        found = find_ignore_file(Path(file), folders)
        if found is None:
            return None
        if found not in loaded:
            try:
                loaded[found] = load_ignore_file(found)
            except InputError as err:
                loaded[found] = None
                result.errors.append(err)
        return loaded[found]

    used_codes: dict[tuple[str, int], set[str]] = {}
    used_entries: set[tuple[Path, int]] = set()
    for finding in findings:
        loc = finding.location
        directive = _inline_match(finding, inline.get(loc.file, ()))
        if directive is not None:
            i, d = directive
            used_codes.setdefault((loc.file, i), set()).update(c for c in d.codes if finding.code.startswith(c))
            result.suppressed.append(finding)
            continue
        ignores = ignore_file(loc.file)
        hit = _entry_match(finding, ignores, today) if ignores else None
        if hit is not None:
            used_entries.add((ignores.path, hit))
            result.suppressed.append(finding)
            continue
        result.kept.append(finding)

    for file, found in inline.items():
        for i, d in enumerate(found):
            if d.reason:
                result.problems += _unused_codes(file, d, used_codes.get((file, i), set()))
    for file in sorted(texts):
        ignore_file(file)  # every ignore file that applies to a checked file is judged
    for ignores in loaded.values():
        if ignores is not None:
            result.problems += _entry_problems(ignores, texts, used_entries, today)
    result.problems.sort(key=lambda p: (p.file, p.line, p.col, p.message))
    return result


# --- inline comments ------------------------------------------------------------------------


def directives(text: str, file: str) -> tuple[list[Directive], list[Problem]]:
    """The suppression comments of a YAML text, and the problems of the ones that are malformed
    or give no reason (those do not suppress)."""
    try:
        comments, spans = scan_yaml(text)
    except _ScanError as err:
        return [], [Problem(file, err.line, err.col, f"suppression comments could not be read: {err.message}", "unreadable")]
    lines = text.split("\n")
    covered = _covered_lines({c.line for c in comments if c.alone}, lines)
    found: list[Directive] = []
    problems: list[Problem] = []
    for comment in comments:
        mention = _MENTION.search(comment.text)
        if mention is None:
            continue
        col = comment.col + mention.start()
        body = comment.text[mention.start():]
        m = _DIRECTIVE.match(body)
        if m is None:
            problems.append(Problem(file, comment.line, col, f"malformed suppression: expected `{SYNTAX}`", "malformed"))
            continue
        codes = tuple(c.strip() for c in m.group("codes").split(","))
        bad = [c for c in codes if not CODE.fullmatch(c)]
        if bad:
            problems.append(Problem(
                file, comment.line, col,
                f"malformed suppression: {bad[0]!r} is not a rule code or prefix (such as SITS204 or SITS2)", "malformed",
            ))
            continue
        reason = m.group("reason").lstrip(_REASON_LEAD).strip()
        if not re.search(r"\w", reason):
            problems.append(Problem(
                file, comment.line, col,
                f"suppression without a reason does not suppress: say why after the codes, "
                f"`# sits-doctor: ignore[{', '.join(codes)}] <why>`", "no-reason",
            ))
            reason = ""
        target = comment.line if not comment.alone else covered.get(comment.line)
        covers = None if target is None else (target, max(target, spans.get(target, target)))
        found.append(Directive(comment.line, col, codes, reason, covers))
    return found, problems


class _ScanError(Exception):
    def __init__(self, message: str, line: int, col: int):
        super().__init__(message)
        self.message, self.line, self.col = message, line, col


def scan_yaml(text: str) -> tuple[list[Comment], dict[int, int]]:
    """The comments of a YAML text, and for each line where a multi-line string starts, its
    last line (both 1-based). Helm ``{{ }}`` actions are blanked first, keeping every offset."""
    import yaml

    work = _blank_templates(text)
    index = LineIndex(text)
    try:
        tokens = list(yaml.scan(work, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        raise _ScanError(problem, mark.line + 1 if mark else 1, mark.column + 1 if mark else 1) from None
    comments: list[Comment] = []
    spans: dict[int, int] = {}
    previous_end = 0
    for token in tokens:
        start, end = token.start_mark.index, token.end_mark.index
        if start > previous_end:
            comments += _gap_comments(text, previous_end, start, index)
        if isinstance(token, yaml.ScalarToken):
            first = token.start_mark.line + 1
            last = first + text.count("\n", start, start + len(text[start:end].rstrip()))
            if last > first:
                spans[first] = max(spans.get(first, first), last)
            if token.style in ("|", ">"):
                header_end = text.find("\n", start, end)
                header = text[start:header_end if header_end != -1 else end]
                m = _BLOCK_HEADER_COMMENT.match(header)
                if m:
                    comments.append(_comment_at(text, start + m.start(1), start + len(header), index))
        previous_end = max(previous_end, end)
    if previous_end < len(text):
        comments += _gap_comments(text, previous_end, len(text), index)
    comments.sort(key=lambda c: (c.line, c.col))
    return comments, spans


def _gap_comments(text: str, start: int, end: int, index: LineIndex) -> list[Comment]:
    """Comments in text between two tokens: there, a '#' at the start of a line or after
    whitespace starts one (YAML's rule; PyYAML's scanner would also take ``"a"#b``)."""
    out = []
    i = text.find("#", start, end)
    while i != -1:
        stop = text.find("\n", i, end)
        stop = end if stop == -1 else stop
        if i == 0 or text[i - 1] in " \t\n\r":
            out.append(_comment_at(text, i, stop, index))
        i = text.find("#", stop, end)
    return out


def _comment_at(text: str, start: int, stop: int, index: LineIndex) -> Comment:
    line, col = index.linecol(start)  # not a count from the start of the text per comment
    line_start = start - col + 1
    return Comment(
        line=line,
        col=col,
        text=text[start:stop].rstrip("\r"),
        alone=not text[line_start:start].strip(),
    )


def _blank_templates(text: str) -> str:
    """Helm actions replaced without moving anything: a line of only actions becomes blank,
    others become ``_`` runs (a plain scalar), newlines inside an action stay."""
    if "{{" not in text:
        return text
    from sits_doctor.source_yaml import template_actions

    pieces, at = [], 0
    for start, end in template_actions(text):  # each {{ to the first }} after it, across lines
        pieces += [text[at:start], re.sub(r"[^\n]", "\x00", text[start:end])]
        at = end
    out = []
    for line in "".join(pieces + [text[at:]]).split("\n"):
        filler = " " if not line.replace("\x00", "").strip() else "_"
        out.append(line.replace("\x00", filler))
    return "\n".join(out)


def _covered_lines(alone_lines: set[int], lines: list[str]) -> dict[int, int]:
    """For each line holding only a comment, the line such a comment covers: the next line that
    is not a comment-only line, when it is not blank (lines without one cover nothing). Built
    from the last line up, once per file: a block of comments does not walk itself per comment."""
    covered: dict[int, int] = {}
    target: int | None = None
    for n in range(len(lines), 0, -1):
        if n in alone_lines:
            if target is not None:
                covered[n] = target
        else:
            target = n if lines[n - 1].strip() else None
    return covered


def _inline_match(finding: Any, found: Iterable[Directive]) -> tuple[int, Directive] | None:
    """The directive that suppresses ``finding``: one on its line first, then the nearest above."""
    line = finding.location.line
    candidates = [
        (i, d) for i, d in enumerate(found)
        if d.reason and d.covers and d.covers[0] <= line <= d.covers[1]
        and any(finding.code.startswith(c) for c in d.codes)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[1].line != line, -c[1].line))


def _unused_codes(file: str, d: Directive, used: set[str]) -> list[Problem]:
    unused = [c for c in d.codes if c not in used]
    if not unused:
        return []
    if d.covers is None:
        where = "it stands alone before a blank line or the end of the file, so it covers no line"
    elif d.covers[0] == d.covers[1]:
        where = f"no {' or '.join(unused)} finding on line {d.covers[0]}"
    else:
        where = f"no {' or '.join(unused)} finding on lines {d.covers[0]}-{d.covers[1]}"
    what = "unused suppression" if len(unused) == len(d.codes) else f"unused code{'s' if len(unused) > 1 else ''} {', '.join(unused)} in suppression"
    return [Problem(file, d.line, d.col, f"{what}: {where}", "unused")]


# --- .sits-doctor-ignore.toml ---------------------------------------------------------------


def find_ignore_file(file: Path, cache: dict[Path, Path | None] | None = None) -> Path | None:
    """The closest ``.sits-doctor-ignore.toml`` in ``file``'s folder or above it."""
    cache = {} if cache is None else cache
    folder = file.resolve().parent
    walked = []
    found: Path | None = None
    while True:
        if folder in cache:
            found = cache[folder]
            break
        walked.append(folder)
        candidate = folder / IGNORE_FILE
        if candidate.is_file():
            found = candidate
            break
        if folder.parent == folder:
            break
        folder = folder.parent
    for f in walked:
        cache[f] = found
    return found


def load_ignore_file(path: Path) -> IgnoreFile:
    """Read and validate an ignore file; an unusable one is an :class:`InputError` (line:col
    where known)."""
    from sits_doctor.source import read_text
    from sits_doctor.source_toml import parse_toml

    shown = _display(path)
    text = read_text(path, shown, what="an ignore file")
    data = parse_toml(text, shown)
    lines = text.split("\n")
    for key in data:
        if key != "ignore":
            where = _key_at(lines, 0, len(lines), key) or (None, None)
            raise InputError(shown, f"unknown key {key!r}: entries go in [[ignore]] tables", *where)
    items = data.get("ignore", [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        where = _key_at(lines, 0, len(lines), "ignore") or (None, None)
        raise InputError(shown, "'ignore' must be an array of tables: write each entry under [[ignore]]", *where)
    headers = [n for n, text_line in enumerate(lines) if re.match(r"\s*\[\[\s*ignore\s*\]\]", text_line)]
    if len(headers) != len(items):
        headers = []  # inline tables: no per-entry lines
    entries = []
    for i, item in enumerate(items):
        first = headers[i] if headers else None
        last = headers[i + 1] if headers and i + 1 < len(headers) else len(lines)
        entries.append(_entry(item, i, shown, lines, first, last))
    return IgnoreFile(path, shown, tuple(entries))


def _entry(item: dict, i: int, shown: str, lines: list[str], first: int | None, last: int) -> IgnoreEntry:
    header = (first + 1, 1) if first is not None else (None, None)

    def fail(message: str, key: str | None = None) -> InputError:
        where = (_key_at(lines, first, last, key) if key and first is not None else None) or header
        return InputError(shown, f"[[ignore]] entry {i + 1}: {message}", *where)

    for key in item:
        if key not in _ENTRY_KEYS:
            raise fail(f"unknown key {key!r} (expected {', '.join(_ENTRY_KEYS)})", key)
    for key in ("path", "pointer", "code", "reason"):
        if key not in item:
            why = " (every suppression says why)" if key == "reason" else ""
            raise fail(f"{key!r} is missing{why}")
        if not isinstance(item[key], str):
            raise fail(f"{key!r} must be a string", key)
    if not re.search(r"\w", item["reason"]):
        raise fail("'reason' is empty (every suppression says why)", "reason")
    if not CODE.fullmatch(item["code"]):
        raise fail(f"'code' {item['code']!r} is not a rule code or prefix (such as SITS204 or SITS2)", "code")
    if item["pointer"] and not item["pointer"].startswith("/"):
        raise fail(f"'pointer' {item['pointer']!r} is not a JSON Pointer: empty, or starting with '/'", "pointer")
    if not item["path"].strip():
        raise fail("'path' is empty", "path")
    expires = item.get("expires")
    if expires is not None and (not isinstance(expires, date) or isinstance(expires, datetime)):
        raise fail("'expires' must be a TOML date such as 2027-01-31 (no quotes, no time)", "expires")
    try:
        pattern = Glob(item["path"])
    except re.error as exc:
        raise fail(f"'path' {item['path']!r} is not a glob: {exc}", "path") from None
    return IgnoreEntry(
        path=item["path"], pointer=item["pointer"], code=item["code"], reason=item["reason"].strip(),
        expires=expires, line=header[0], pattern=pattern,
    )


_REPEATS = ("dirs", "any", "star")  # the tokens that repeat: **/ (folders), ** and *


def _glob_tokens(pattern: str) -> list[tuple[str, str]]:
    """A path glob as tokens: ``dirs`` (``**/``: any number of folders), ``any`` (``**``),
    ``star`` (``*``: within a folder), ``one`` (``?``), ``class`` (``[abc]`` / ``[!abc]``, its
    regex text) and ``char`` (itself)."""
    pattern = pattern.removeprefix("./").lstrip("/")
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(("dirs", ""))
            i += 3
        elif pattern.startswith("**", i):
            out.append(("any", ""))
            i += 2
        elif pattern[i] == "*":
            out.append(("star", ""))
            i += 1
        elif pattern[i] == "?":
            out.append(("one", ""))
            i += 1
        elif pattern[i] == "[" and pattern.find("]", i + 2) != -1:
            close = pattern.find("]", i + 2)
            body = pattern[i + 1:close]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append(("class", "[" + body.replace("\\", "\\\\") + "]"))
            i = close + 1
        else:
            out.append(("char", pattern[i]))
            i += 1
    return out


_REGEX_OF = {"dirs": "(?:.*/)?", "any": ".*", "star": "[^/]*", "one": "[^/]"}


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex over POSIX relative paths: ``*`` and ``?`` stay within a folder,
    ``**/`` matches any number of folders, ``[abc]`` / ``[!abc]`` are character classes. Raises
    re.error for a character class no regex accepts (``[z-a]``)."""
    tokens = _glob_tokens(pattern)
    return re.compile("".join(_REGEX_OF.get(kind) or (text if kind == "class" else re.escape(text))
                              for kind, text in tokens))


class Glob:
    """A path glob (:func:`glob_regex`'s language) matched without backtracking: with two or more
    repeating tokens a regex tries every way to split the path between them (``*a*a*a*a*ab``
    took 34 s on a 200-character name), so such a glob runs as a set of positions in the pattern
    advanced one character at a time (length of path × length of glob). With one, the regex is
    as fast and as bounded."""

    def __init__(self, pattern: str):
        self.tokens = _glob_tokens(pattern)
        self.regex = glob_regex(pattern)
        self.classes = {i: re.compile(text) for i, (kind, text) in enumerate(self.tokens) if kind == "class"}
        self.simulated = sum(kind in _REPEATS for kind, _ in self.tokens) > 1

    def fullmatch(self, path: str) -> bool:
        if not self.simulated:
            return self.regex.fullmatch(path) is not None
        tokens, end = self.tokens, len(self.tokens)
        at, inside = self._closure({0}), set()  # inside: a **/ part way through its folders
        for c in path:
            nxt, inner = set(), set()
            for i in at:
                if i == end:
                    continue
                kind, text = tokens[i]
                if kind == "char":
                    if c == text:
                        nxt.add(i + 1)
                elif kind == "one":
                    if c != "/":
                        nxt.add(i + 1)
                elif kind == "class":
                    if self.classes[i].match(c):
                        nxt.add(i + 1)
                elif kind == "star":
                    if c != "/":
                        nxt.add(i)
                elif kind == "any":
                    nxt.add(i)
                else:  # dirs
                    inside.add(i)
            for i in inside:  # "**/" is "" or ".*/": every character keeps it open, a "/" may close it
                inner.add(i)
                if c == "/":
                    nxt.add(i + 1)
            at, inside = self._closure(nxt), inner
            if not at and not inside:
                return False
        return end in at

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` and every position reached from them by a repeating token matching nothing."""
        out, todo = set(states), list(states)
        while todo:
            i = todo.pop()
            if i < len(self.tokens) and self.tokens[i][0] in _REPEATS and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return out


def _entry_match(finding: Any, ignores: IgnoreFile, today: date) -> int | None:
    loc = finding.location
    rel = _relative(Path(loc.file), ignores.path.parent)
    if rel is None:
        return None
    for n, entry in enumerate(ignores.entries):
        if entry.expires is not None and today >= entry.expires:
            continue
        if not finding.code.startswith(entry.code) or not entry.pattern.fullmatch(rel):
            continue
        if entry.pointer == "" or loc.pointer == entry.pointer or loc.pointer.startswith(entry.pointer + "/"):
            return n
    return None


def _entry_problems(ignores: IgnoreFile, texts: Mapping[str, str], used: set[tuple[Path, int]], today: date) -> list[Problem]:
    checked = [rel for rel in (_relative(Path(f), ignores.path.parent) for f in texts) if rel is not None]
    problems = []
    for n, entry in enumerate(ignores.entries):
        what = f"[[ignore]] {entry.code} at {entry.path} {entry.pointer or '(whole document)'}"
        line = entry.line or 1
        covers = any(entry.pattern.fullmatch(rel) for rel in checked)
        if not covers:
            continue  # an entry about files this run does not check says nothing about this run
        if entry.expires is not None and today >= entry.expires:
            problems.append(Problem(
                ignores.shown, line, 1,
                f"expired suppression: {what} expired on {entry.expires.isoformat()}; the findings it "
                "covered are reported again (fix them, or renew the entry with a new date)", "expired",
            ))
        elif (ignores.path, n) not in used:
            problems.append(Problem(ignores.shown, line, 1, f"unused suppression: {what} matched no finding", "unused"))
    return problems


def _relative(file: Path, folder: Path) -> str | None:
    try:
        return file.resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return None


def _key_at(lines: list[str], first: int, last: int, key: str) -> tuple[int, int] | None:
    """Line and column (1-based) of ``key =`` between two line indexes, if it is there."""
    pattern = re.compile(rf"\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    for n in range(first, last):
        m = pattern.match(lines[n])
        if m:
            return n + 1, len(lines[n]) - len(lines[n].lstrip()) + 1
    return None


def _display(path: Path) -> str:
    from sits_doctor.source import display_path

    return display_path(path)
