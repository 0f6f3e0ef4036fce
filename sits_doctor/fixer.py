"""Applying fixes: the engine behind ``sits-doctor fix``.

For each file: take the applicable fixes of its findings (safe ones; unsafe ones with
``--unsafe-fixes``; display-only ones never), sort them, drop any that overlaps one already
taken (a later round gets it), apply the edits to the text, check the new text again, and repeat
until no applicable fix is left (at most :data:`MAX_ROUNDS` rounds; a file that does not settle
is left untouched and reported). The result is written by :mod:`sits_doctor.atomic_write` (a
temporary file in the same folder, renamed over the original; see there for what it refuses),
and only if the file on disk still holds exactly the text that was checked. A symlink is written
through only when its target stays inside the checked tree. Every byte outside the edits is copied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sits_doctor import atomic_write
from sits_doctor.engine import CheckOptions, Report, check
from sits_doctor.errors import InputError
from sits_doctor.finding import Edit, Finding, Fix, Safety
from sits_doctor.source import MAX_FILE_BYTES

MAX_ROUNDS = 10
BOM = "\ufeff"


@dataclass
class FileResult:
    path: str  # display path
    resolved: Path
    original: str
    new: str
    fixed: list[tuple[Finding, Fix]] = field(default_factory=list)
    problem: str | None = None  # why nothing is (or was) written
    rounds: list[list[Edit]] = field(default_factory=list)  # the edits of each round, against that round's text

    @property
    def changed(self) -> bool:
        return self.problem is None and self.new != self.original

    def diff(self) -> str:
        """The unified diff of the fixes, secrets redacted (reporters/unified_diff.py)."""
        from sits_doctor.reporters.unified_diff import unified_diff

        return unified_diff(self.original, self.new, self.rounds, self.path)


@dataclass
class FixResult:
    files: list[FileResult]
    report: Report  # the check after the fixes (in memory, or on disk after --apply)
    shown_only: list[tuple[Finding, Fix]] = field(default_factory=list)  # display / unsafe not taken
    errors: list[InputError] = field(default_factory=list)


def applicable(fix: Fix, unsafe: bool) -> bool:
    return fix.safety is Safety.SAFE or (unsafe and fix.safety is Safety.UNSAFE)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` applied (each against the original offsets)."""
    out, at = [], 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < at or e.end > len(text) or e.start > e.end:
            raise ValueError(f"overlapping or out-of-range edit {e}")
        out.append(text[at:e.start])
        out.append(e.new)
        at = e.end
    out.append(text[at:])
    return "".join(out)


def _choose(fixes: list[tuple[Finding, Fix]]) -> list[tuple[Finding, Fix]]:
    """Fixes whose edits do not overlap an earlier fix's (in file order); one fix per edit set."""
    taken: list[tuple[Finding, Fix]] = []
    spans: list[tuple[int, int]] = []
    seen: set[tuple] = set()
    for finding, fix in sorted(fixes, key=lambda fx: (min(e.start for e in fx[1].edits), fx[0].code)):
        key = tuple((e.start, e.end, e.new) for e in fix.edits)
        if key in seen:
            continue  # the same edit offered by two findings (a YAML anchor shared by two plans)
        if any(s < e.end and e.start < t or (s == e.start == e.end == t) for e in fix.edits for s, t in spans):
            continue
        seen.add(key)
        taken.append((finding, fix))
        spans += [(e.start, e.end) for e in fix.edits]
    return taken


def fix_paths(paths: Sequence[str | Path], options: CheckOptions, *, unsafe: bool = False,
              apply: bool = False) -> FixResult:
    """Compute (and with ``apply`` write) the fixes for ``paths``."""
    report = check(paths, options)
    texts: dict[Path, str] = {}
    results: dict[Path, FileResult] = {}
    shown: list[tuple[Finding, Fix]] = []
    for finding in report.findings:
        for fix in finding.fixes:
            if not fix.edits or not applicable(fix, unsafe):
                shown.append((finding, fix))
    for _round in range(MAX_ROUNDS):
        by_file: dict[Path, list[tuple[Finding, Fix]]] = {}
        for finding in report.findings:
            for fix in finding.fixes:
                if fix.edits and applicable(fix, unsafe):
                    resolved = Path(fix.file).resolve()
                    if resolved in results and results[resolved].problem:
                        continue
                    by_file.setdefault(resolved, []).append((finding, fix))
        if not by_file:
            break
        for resolved, fixes in by_file.items():
            current = texts.get(resolved, fixes[0][1].source)
            if fixes[0][1].source != current:  # computed on another text: wait for a fresh check
                continue
            chosen = _choose(fixes)
            edits = [e for _, fx in chosen for e in fx.edits]
            new = apply_edits(current, edits)
            result = results.setdefault(resolved, FileResult(fixes[0][1].file, resolved, current, current))
            result.new = new
            # a later round's findings sit in an edited text: report them where they are in the file as it is
            if result.rounds:
                from sits_doctor.source import LineIndex

                now, then = LineIndex(current), LineIndex(result.original)
                chosen = [(_at_original(f, now, then, result.rounds), fx) for f, fx in chosen]
            result.fixed += chosen
            result.rounds.append(edits)
            texts[resolved] = new
        report = check(paths, options._replace(texts=dict(texts)))
    else:
        for resolved in {Path(fx.file).resolve() for f in report.findings for fx in f.fixes
                         if fx.edits and applicable(fx, unsafe)}:
            if resolved in results:
                results[resolved].problem = f"did not settle after {MAX_ROUNDS} rounds of fixes; nothing written"
    result = FixResult(sorted(results.values(), key=lambda r: r.path), report, shown)
    for r in result.files:
        _verify_parses(r)
    if apply:
        roots = [checked_tree(p) for p in paths]
        for r in result.files:
            if r.changed:
                try:
                    write_atomically(r.resolved, r.original, r.new, roots)
                except InputError as err:
                    r.problem = err.message
                    result.errors.append(err)
        result.report = check(paths, options._replace(texts=None))
    return result


def _at_original(finding: Finding, now, then, rounds: list[list[Edit]]) -> Finding:
    """``finding`` (found in the text ``now`` indexes: the file after ``rounds`` of edits) at the
    place in the original file (``then``) its position came from: an offset after an edit moves
    back by what the edit changed; one inside an edit's new text goes to the edit's start."""
    if not 1 <= finding.location.line <= len(now.starts):
        return finding  # no line of `now` (a YAML parser counts a lone CR as a line break; LineIndex does not)
    offset = now.offset(finding.location.line, finding.location.col)
    for edits in reversed(rounds):
        shift = 0
        for e in sorted(edits, key=lambda e: (e.start, e.end)):
            new_start = e.start + shift
            if offset < new_start:
                break
            if offset < new_start + len(e.new):
                offset, shift = e.start, 0
                break
            shift += (e.end - e.start) - len(e.new)
        offset += shift
    line, col = then.linecol(offset)
    return finding._replace(location=finding.location._replace(line=line, col=col))


def _verify_parses(r: FileResult) -> None:
    from sits_doctor.loaders import parse_docs

    if r.problem or not r.changed:
        return
    try:
        parse_docs(r.new, r.resolved, r.path)
    except InputError as err:  # a builder bug: never write a file we cannot read back
        r.problem = f"the fixed text would not parse ({err.message}); nothing written"


def checked_tree(given: str | Path) -> Path:
    """The folder a named path puts under check: a folder itself, or a named file's folder (not
    where a symlink of that name points: `fix --apply dir/link.yaml` must not write outside dir)."""
    path = Path(given)
    if path.is_dir():
        return path.resolve()
    return path.absolute().parent.resolve()


def _inside(path: Path, roots: list[Path]) -> bool:
    """Whether the resolved ``path`` lies in one of the checked folders."""
    return any(root in path.parents for root in roots)


def write_atomically(path: Path, expected: str, new: str, roots: list[Path]) -> None:
    """Replace the file at ``path`` (resolved) with ``new`` if it still holds ``expected``
    (:func:`sits_doctor.atomic_write.replace_file` does the writing and its refusals)."""
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    if not _inside(path, roots):
        raise InputError(shown, "not written: the file is reached through a symlink that leaves the checked tree")

    def rewrite(raw: bytes) -> bytes:
        bom = raw.startswith(BOM.encode())
        try:
            current = raw.decode("utf-8")
        except UnicodeDecodeError:
            current = None
        if current is not None and bom:
            current = current[1:]
        if current != expected:
            raise InputError(shown, "not written: the file changed since it was checked; run fix again")
        return ((BOM if bom else "") + new).encode("utf-8")

    atomic_write.replace_file(path, shown, rewrite, MAX_FILE_BYTES)
