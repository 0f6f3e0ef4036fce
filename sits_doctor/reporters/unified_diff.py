"""The unified diff ``fix`` prints, built from the edits the fixer made rather than by comparing
the two texts: ``difflib.unified_diff`` over a whole file is quadratic in its lines (a stream of
10 000 YAML documents with a fix in each did not finish in 300 s); here only the lines an edit
touched are compared (with difflib, so a change reads as it always did), the lines between edits
are known to be equal, and the hunks are grouped with difflib's rule (3 lines of context, hunks
closer than 6 lines joined) and printed in its format, byte for byte.

The lines shown come from the texts as :mod:`sits_doctor.redact` leaves them (whole documents,
so a secret whose name is on a line outside the hunk is still hidden); the hunks are computed on
the real texts, and redaction never adds or removes a line.
"""

from __future__ import annotations

import difflib
from bisect import bisect_right
from itertools import accumulate
from typing import Iterator, Sequence

from sits_doctor import redact

CONTEXT = 3  # difflib.unified_diff's n
JOIN = 2 * CONTEXT  # changed line ranges this close are compared as one block (they share a hunk anyway)
JOIN_LIMIT = 400  # ... unless that block would grow past this many lines (the comparison is quadratic in it)

Opcode = tuple[str, int, int, int, int]  # difflib's (tag, i1, i2, j1, j2), over lines


def unified_diff(original: str, new: str, rounds: Sequence[Sequence], path: str) -> str:
    """The diff of ``original`` → ``new`` (``rounds``: each fix round's edits, against that
    round's text), with ``a/PATH`` and ``b/PATH`` headers and difflib's "No newline" marks."""
    if original == new:
        return ""
    a, b = original.splitlines(keepends=True), new.splitlines(keepends=True)
    shown_a, shown_b = _shown(original, a), _shown(new, b)
    out: list[str] = []
    name = path.lstrip("/")
    ranges = _line_ranges(a, b, _regions(original, new, rounds))
    if not _equal_between(a, b, ranges):  # the edits do not account for every change: compare it all
        ranges = [(0, len(a), 0, len(b))]
    for group in _groups(_opcodes(a, b, ranges)):
        if not out:
            out += [f"--- a/{name}\n", f"+++ b/{name}\n"]
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in shown_a[i1:i2]]
                continue
            if tag in ("replace", "delete"):
                out += ["-" + line for line in shown_a[i1:i2]]
            if tag in ("replace", "insert"):
                out += ["+" + line for line in shown_b[j1:j2]]
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _shown(text: str, lines: list[str]) -> list[str]:
    """``lines`` (of ``text``) as they may be printed: the redacted document's lines."""
    shown = redact.redact(text).splitlines(keepends=True)
    return shown if len(shown) == len(lines) else [redact.redact(line) for line in lines]


def _regions(original: str, new: str, rounds: Sequence[Sequence]) -> list[tuple[int, int, int, int]]:
    """The character spans that differ, as ``(new_start, new_end, old_start, old_end)``: the
    rounds' edits composed (each round's offsets are in the text the round before left), spans
    that overlap or touch merged. Without rounds, the span between the common prefix and suffix."""
    if not rounds:
        start = 0
        limit = min(len(original), len(new))
        while start < limit and original[start] == new[start]:
            start += 1
        end = 0
        while end < limit - start and original[-1 - end] == new[-1 - end]:
            end += 1
        return [(start, len(new) - end, start, len(original) - end)]
    regions: list[tuple[int, int, int, int]] = []  # in the current text: (start, end, old_start, old_end)
    for edits in rounds:
        items = sorted([(s, e, "region", os, oe) for s, e, os, oe in regions]
                       + [(e.start, e.end, "edit", len(e.new), 0) for e in edits])
        clusters: list[list] = []
        for item in items:
            if clusters and item[0] <= clusters[-1][1]:
                clusters[-1][1] = max(clusters[-1][1], item[1])
                clusters[-1][2].append(item)
            else:
                clusters.append([item[0], item[1], [item]])
        regions, old_shift, new_shift = [], 0, 0
        for start, end, members in clusters:
            old_start = start - old_shift
            old_shift += sum((e - s) - (oe - os) for s, e, kind, os, oe in members if kind == "region")
            new_start = start + new_shift
            new_shift += sum(n - (e - s) for s, e, kind, n, _ in members if kind == "edit")
            regions.append((new_start, end + new_shift, old_start, end - old_shift))
    return regions


def _line_ranges(a: list[str], b: list[str], regions) -> list[tuple[int, int, int, int]]:
    """The line ranges ``(a_lo, a_hi, b_lo, b_hi)`` holding the changed spans, each line an edit
    touches included whole; ranges that share a line, or lie within JOIN lines of each other, merged."""
    starts_a = [0, *accumulate(len(line) for line in a)]
    starts_b = [0, *accumulate(len(line) for line in b)]

    def line_of(starts: list[int], offset: int) -> int:
        return min(bisect_right(starts, offset) - 1, len(starts) - 1)

    ranges: list[list[int]] = []
    for new_start, new_end, old_start, old_end in sorted(regions, key=lambda r: r[2]):
        a_lo, a_hi = line_of(starts_a, old_start), min(line_of(starts_a, old_end) + 1, len(a))
        b_lo, b_hi = line_of(starts_b, new_start), min(line_of(starts_b, new_end) + 1, len(b))
        last = ranges[-1] if ranges else None
        if last and (a_lo < last[1] or b_lo < last[3]  # they share a line
                     or (a_lo - last[1] <= JOIN or b_lo - last[3] <= JOIN)
                     and max(a_hi - last[0], b_hi - last[2]) <= JOIN_LIMIT):
            last[1], last[3] = max(last[1], a_hi), max(last[3], b_hi)
        else:
            ranges.append([a_lo, a_hi, b_lo, b_hi])
    return [tuple(r) for r in ranges]


def _equal_between(a: list[str], b: list[str], ranges) -> bool:
    """Whether the lines outside ``ranges`` are the same in ``a`` and ``b``."""
    i = j = 0
    for a_lo, a_hi, b_lo, b_hi in [*ranges, (len(a), len(a), len(b), len(b))]:
        if a[i:a_lo] != b[j:b_lo]:
            return False
        i, j = a_hi, b_hi
    return True


def _opcodes(a: list[str], b: list[str], ranges) -> list[Opcode]:
    """difflib's opcodes for the whole file: the lines between ranges equal, each range compared."""
    ops: list[Opcode] = []

    def add(op: Opcode) -> None:
        tag, i1, i2, j1, j2 = op
        if i1 == i2 and j1 == j2:
            return
        if ops and tag == "equal" and ops[-1][0] == "equal":
            ops[-1] = ("equal", ops[-1][1], i2, ops[-1][3], j2)
        else:
            ops.append(op)

    i = j = 0
    for a_lo, a_hi, b_lo, b_hi in ranges:
        add(("equal", i, a_lo, j, b_lo))
        matcher = difflib.SequenceMatcher(None, a[a_lo:a_hi], b[b_lo:b_hi])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            add((tag, a_lo + i1, a_lo + i2, b_lo + j1, b_lo + j2))
        i, j = a_hi, b_hi
    add(("equal", i, len(a), j, len(b)))
    return ops


def _groups(codes: list[Opcode], n: int = CONTEXT) -> Iterator[list[Opcode]]:
    """difflib.SequenceMatcher.get_grouped_opcodes over ``codes``: hunks with ``n`` lines of context."""
    if not codes:
        codes = [("equal", 0, 1, 0, 1)]
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    """A hunk's line range as unified diffs write it (difflib._format_range_unified)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"
