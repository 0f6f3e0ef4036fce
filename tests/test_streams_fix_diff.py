"""The ``fix`` diff of a long YAML stream (issue 27 #4): built from the fixes' edit spans, its
time grows with the file, not with its square (``difflib.unified_diff`` over the whole file did
not finish a 10 000-document stream in 300 s), and it is the diff difflib prints — the same bytes
when every line is distinct (the fixture snapshots hold the real cases), and always a diff that
turns the old text into the new one.
"""

from __future__ import annotations

import difflib
import random
import subprocess
import sys
import textwrap

from sits_doctor.finding import Edit
from sits_doctor.fixer import FileResult, apply_edits

TIMING = textwrap.dedent('''
    import time
    from pathlib import Path
    from sits_doctor.finding import Edit
    from sits_doctor.fixer import FileResult

    DOC = ("apiVersion: apps/v1\\nkind: Deployment\\nmetadata:\\n  name: vllm-{i}\\nspec:\\n"
           "      containers:\\n          args: [\\"--model\\", \\"org/m\\", \\"--swap-space\\", \\"4\\"]\\n")
    FLAG = ', "--swap-space", "4"'

    def cost(documents):
        text = "---\\n".join(DOC.format(i=i) for i in range(documents))
        edits, at = [], text.find(FLAG)
        while at >= 0:  # the fix of each document: its removed flag
            edits.append(Edit(at, at + len(FLAG), ""))
            at = text.find(FLAG, at + 1)
        new = text.replace(FLAG, "")
        result = FileResult("stream.yaml", Path("stream.yaml"), text, new, rounds=[edits])
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            diff = result.diff()
            best = min(best, time.perf_counter() - start)
        assert diff.count("\\n-") == documents
        return best

    print(cost(4000) / cost(1000))
''')


def test_diff_time_grows_with_the_file_not_its_square():
    try:
        done = subprocess.run([sys.executable, "-c", TIMING], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the diff of a 4000-document stream did not finish in 120 s") from None
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 8, "4x the documents should cost about 4x the time (a whole-file difflib: 16x)"


def _difflib(original: str, new: str) -> str:
    lines = difflib.unified_diff(original.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile="a/f.yaml", tofile="b/f.yaml")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _random_fix(rng: random.Random, text: str, pieces: list[str]) -> tuple[str, list[list[Edit]]]:
    """``text`` after 1-3 rounds of random non-overlapping edits, and the rounds."""
    rounds = []
    for _ in range(rng.randint(1, 3)):
        cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, 2 * rng.randint(1, 4))))
        edits = [Edit(s if rng.random() < 0.7 else e, e, rng.choice(pieces)) for s, e in zip(cuts[::2], cuts[1::2])]
        text = apply_edits(text, edits)
        rounds.append(edits)
    return text, rounds


def test_same_bytes_as_difflib_when_lines_are_distinct():
    rng = random.Random(27)
    for trial in range(1500):
        original = "".join(f"line {i}: --flag-{i} {i}\n" for i in range(rng.randint(0, 50))) + rng.choice(["", "end"])
        pieces = ["", f"new {trial}\n", f"x{trial}", f"--other {trial}\n", f"a{trial}\nb{trial}\n"]
        new, rounds = _random_fix(rng, original, pieces)
        if new != original:
            assert FileResult("f.yaml", None, original, new, rounds=rounds).diff() == _difflib(original, new)


def _patch(original: str, diff: str) -> str:
    """Apply a unified diff (as difflib writes it) to ``original``."""
    old = original.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    lines = diff.splitlines(keepends=True)[2:]
    for k, line in enumerate(lines):
        if line.startswith("@@"):
            start, _, count = line.split()[1][1:].partition(",")
            start = int(start) - (0 if count == "0" else 1)
            out += old[at:start]
            at = start
        elif line.startswith("\\"):
            continue
        else:
            body = line[1:]
            if k + 1 < len(lines) and lines[k + 1].startswith("\\ No newline"):
                body = body[:-1]
            if line[0] == " ":
                out.append(old[at])
                at += 1
            elif line[0] == "-":
                at += 1
            else:
                out.append(body)
    return "".join(out + old[at:])


def test_diff_turns_the_old_text_into_the_new_one():
    """Repeated lines, CRLF and CR endings, a missing last newline: where several diffs are
    right, the one printed may pick other lines than difflib would, and it still applies."""
    rng = random.Random(9)
    words = ["a", "b", "x y", "--flag 1", "", "- --swap-space"]
    for _ in range(3000):
        original = "".join(rng.choice(words) + rng.choice(["\n", "\n", "\r\n", "\r", ""])
                           for _ in range(rng.randint(0, 30)))
        new, rounds = _random_fix(rng, original, ["", "z\n", "q", "\n", "--new 2\n", "a\n"])
        if new != original:
            diff = FileResult("f.yaml", None, original, new, rounds=rounds).diff()
            assert _patch(original, diff) == new, (original, new, diff)


def test_diff_without_rounds_compares_the_texts():
    assert FileResult("f.yaml", None, "a\nb\nc\n", "a\nB\nc\n").diff() == _difflib("a\nb\nc\n", "a\nB\nc\n")
