"""Every scanner of file text is linear: no input of ~100 KB makes one backtrack.

Issue 27 #3. Each case feeds one reading routine an input built against the pattern it used to
hold (nested or adjacent quantifiers, a lazy gap before an optional tail) and times it against
the same routine reading an ordinary input of the same size: the ratio must stay small, where
the old patterns took seconds to forever (a 221-byte Helm line ran over a minute). Each case
runs in its own interpreter under a timeout, so a scanner that hangs fails the test instead of
hanging the suite. A second test pins what the scanners find to what the patterns found, on
short random inputs where the patterns are still fast.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap

import pytest

SIZE = 100_000
MAX_RATIO = 50
TIMEOUT_S = 60

# Each case: the setup (imports, ``read(text)``: the routine under test) and two expressions of
# SIZE, the adversarial text and an ordinary one of about the same length.
CASES = {
    "helm control line of many actions": (
        "from sits_doctor.source_yaml import neutralize_templates as read",
        "'{{' + '}}{{' * (SIZE // 4) + ' x'",  # (\{\{-?.*?-?\}\}\s*)+$: every split of the actions
        "'a: {{ .Values.a }}\\n' * (SIZE // 19)",
    ),
    "helm actions that never close": (
        "from sits_doctor.source_yaml import neutralize_templates as read",
        "'{{\\n' * (SIZE // 3)",  # \{\{-?[^}]*?\n.*?-?\}\}: every start, every line break, every end
        "'a: {{ .Values.a }}\\n' * (SIZE // 19)",
    ),
    "helm actions in suppression scanning": (
        "from sits_doctor.suppressions import scan_yaml as read",
        "'a: \"' + '{{' * (SIZE // 2) + '\"\\n'",  # \{\{.*?\}\} (DOTALL): every {{ scans to the end
        "'a: {{ .Values.a }}\\n' * (SIZE // 19)",
    ),
    "json string that never closes": (
        "from sits_doctor.source import parse_json\n"
        "from sits_doctor.errors import InputError\n"
        "def read(text):\n"
        "    try:\n"
        "        parse_json(text, 'x.json')\n"
        "    except InputError:\n"
        "        pass",
        "'\"' + '\\\\\"' * (SIZE // 2)",  # "(?:[^"\\]|\\.)*": every quote scans to the end
        "json.dumps({f'key{i}': 'value' for i in range(SIZE // 16)})",
    ),
    "pip install repeated on one RUN line": (
        "from sits_doctor.loaders.script import parse_dockerfile\n"
        "def read(text):\n"
        "    parse_dockerfile(text, 'Dockerfile')",
        "'FROM python:3.11\\nRUN ' + 'pip install x ' * (SIZE // 14)",  # a lazy gap from every pip install
        "'FROM python:3.11\\n' + 'RUN pip install x\\n' * (SIZE // 18)",
    ),
    "gpu name padded with blanks": (
        "from sits_doctor.catalogs import gpus\n"
        "def read(text):\n"
        "    try:\n"
        "        gpus.lookup(text)\n"
        "    except ValueError:\n"
        "        pass",
        "'H100' + ' ' * SIZE + '!'",  # .*?\s*[x:]: a lazy name, then blanks, rescanned from each
        "'H100' + 'a' * SIZE + '!'",
    ),
    "gpu product label with many MIG suffixes": (
        "from sits_doctor.catalogs import gpus\n"
        "def read(text):\n"
        "    try:\n"
        "        gpus.by_product_label(text)\n"
        "    except ValueError:\n"
        "        pass",
        "'H100' + '-MIG-' * (SIZE // 5) + '\\nx'",  # (-MIG-.*)$: every -MIG- scans to a line break
        "'H100' + '-mig' * (SIZE // 4) + '\\nx'",
    ),
    "skypilot accelerator padded with blanks": (
        "from sits_doctor.loaders import skypilot\n"
        "def read(text):\n"
        "    skypilot._members(text, '/resources/accelerators')",
        "'H100' + ' ' * SIZE + '!'",  # \s*(?::...)?\s*$: two \s* split a run of blanks every way
        "'H100' + 'a' * SIZE + '!'",
    ),
}

_PROGRAM = """
import json, time
SIZE = {size}
{setup}

def best(text, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read(text)
        times.append(time.perf_counter() - start)
    return min(times)

hostile, ordinary = {hostile}, {ordinary}
read(ordinary)  # imports and caches warmed
print(json.dumps({{"ratio": best(hostile) / best(ordinary), "sizes": [len(hostile), len(ordinary)]}}))
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_input_costs_about_what_an_ordinary_one_does(case: str, tmp_path) -> None:
    setup, hostile, ordinary = CASES[case]
    program = _PROGRAM.format(size=SIZE, setup=setup, hostile=hostile, ordinary=ordinary)
    try:  # run from an empty folder: the installed package, not the clone root's folders by name
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True,
                              timeout=TIMEOUT_S, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: still running after {TIMEOUT_S} s on {SIZE // 1000} KB (backtracking)")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert min(result["sizes"]) >= SIZE * 0.9, result
    assert result["ratio"] < MAX_RATIO, f"{case}: {result['ratio']:.0f}x the time of an ordinary input of its size"


_GLOB_PROGRAM = """
import time
from types import SimpleNamespace
from datetime import date
from pathlib import Path
from sits_doctor.suppressions import _entry_match, load_ignore_file

def ignores(glob):
    path = Path("ignore-" + str(len(glob)) + ".toml")
    path.write_text(f'[[ignore]]\\npath = "{glob}"\\npointer = ""\\ncode = "SITS204"\\nreason = "why"\\n')
    return load_ignore_file(path)

finding = SimpleNamespace(code="SITS204", location=SimpleNamespace(file="a" * 250, pointer=""))

def best(loaded):
    times = []
    for _ in range(3):
        start = time.perf_counter()
        _entry_match(finding, loaded, date(2026, 1, 1))
        times.append(time.perf_counter() - start)
    return min(times)

hostile, ordinary = ignores("*a" * 8 + "b"), ignores("*" + "a" * 15 + "*b")
print(best(hostile) / best(ordinary))
"""


def test_an_ignore_file_glob_of_many_stars_costs_what_a_plain_one_does(tmp_path) -> None:
    """``*a*a*a*a*a*a*a*ab`` against a 250-character name: a regex tries every way to split the
    name between the stars (five stars took 34 s on 200 characters)."""
    try:
        done = subprocess.run([sys.executable, "-c", _GLOB_PROGRAM], capture_output=True, text=True,
                              timeout=TIMEOUT_S, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a glob of eight stars still matching after {TIMEOUT_S} s")
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) < MAX_RATIO


# --- the scanners find what the patterns they replace found ------------------------------------------

_OLD_ACTION = re.compile(r"\{\{-?.*?-?\}\}")
_OLD_MULTILINE_ACTION = re.compile(r"\{\{-?[^}]*?\n.*?-?\}\}", re.DOTALL)
_OLD_WHOLE_LINE_ACTION = re.compile(r"^\s*(\{\{-?.*?-?\}\}\s*)+$")
_OLD_TEMPLATE = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_OLD_PIN = re.compile(r"\b(?:pip3?|uv\s+pip)\s+install\b[^\n;&|]*?(?<![\w.-])(?P<pkg>vllm|tensorrt[-_]llm)"
                      r"(?:\[[^\]]*\])?==(?P<version>\d+(?:\.\d+)+(?:[.-]?post\d+|[.-]?rc\d+)?)(?![\w.])")
_OLD_QUOTED = {q: re.compile(q + r"(?:[^" + q + r"\n\\]|\\.)*" + q) for q in "\"'"}


def _texts(alphabet: list[str], count: int, longest: int, seed: int):
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


def test_the_helm_scanners_find_what_the_patterns_found() -> None:
    from sits_doctor.source_yaml import _is_control_line, _multiline_actions, template_actions

    for text in _texts(["{", "}", "{{", "}}", "-", "\n", " ", "\t", "\xa0", "a"], 20_000, 16, seed=1):
        line = text.split("\n")[0]
        assert template_actions(line) == [m.span() for m in _OLD_ACTION.finditer(line)], repr(line)
        assert template_actions(text) == [m.span() for m in _OLD_TEMPLATE.finditer(text)], repr(text)
        assert _multiline_actions(text) == [m.span() for m in _OLD_MULTILINE_ACTION.finditer(text)], repr(text)
        assert _is_control_line(line) == bool(_OLD_WHOLE_LINE_ACTION.match(line)), repr(line)


def test_the_glob_matcher_matches_what_the_regex_matched() -> None:
    from sits_doctor.suppressions import Glob, glob_regex

    paths = list(_texts(["a", "b", "/", ".", "c"], 40_000, 9, seed=4))
    for n, pattern in enumerate(_texts(["**/", "**", "*", "?", "a", "b", "/", "[ab]", "[!a]", "."], 2_000, 6, seed=5)):
        glob, regex = Glob(pattern), glob_regex(pattern)
        glob.simulated = True  # the position-set matcher, even where one repeat lets the regex run
        for path in paths[20 * n: 20 * n + 20]:
            assert glob.fullmatch(path) == (regex.fullmatch(path) is not None), (pattern, path)


def test_the_pin_scanner_finds_what_the_pattern_found() -> None:
    from sits_doctor.loaders.script import _pins

    words = ["pip", "pip3", "uv", "install", " ", "\n", ";", "&&", "|", "vllm", "tensorrt-llm", "tensorrt_llm",
             "==", "0.8.5", "1.2", "rc1", "post1", "[audio]", "x", "-", "."]
    for text in _texts(words, 20_000, 12, seed=2):
        found = [(m.span("pkg"), m["version"]) for m in _pins(text)]
        assert found == [(m.span("pkg"), m["version"]) for m in _OLD_PIN.finditer(text)], repr(text)


def test_the_pbtxt_string_scanner_ends_strings_where_the_pattern_did() -> None:
    from sits_doctor.loaders.triton import _quoted_end

    for body in _texts(['"', "'", "\\", "\n", "a", " "], 20_000, 10, seed=3):
        for quote in "\"'":
            text = quote + body
            m = _OLD_QUOTED[quote].match(text, 0)
            assert _quoted_end(text, 0) == (m.end() if m else 1), repr(text)


# A long string, read by the routine that used a pattern keeping ~120 bytes of backtracking state
# per character of it (1.2 GiB for a 10 MB string).
LONG_STRINGS = {
    "pbtxt": ("from sits_doctor.loaders.triton import parse_pbtxt as read",
              "'name: \"' + 'a' * 1_000_000 + '\"\\nbackend: \"python\"\\n'"),
    "json": ("from sits_doctor.source import parse_json as read",
             "'{\"model_type\": \"' + 'a' * 1_000_000 + '\"}'"),
}


@pytest.mark.parametrize("kind", sorted(LONG_STRINGS))
def test_a_long_string_keeps_no_state_per_character(kind: str, tmp_path) -> None:
    """Reading a 1 MB string holds a few copies of the text at most, not state per character."""
    setup, text = LONG_STRINGS[kind]
    program = textwrap.dedent(f"""
        import tracemalloc
        {setup}
        text = {text}
        read(text, 'x')  # imports warmed
        tracemalloc.start()
        read(text, 'x')
        print(tracemalloc.get_traced_memory()[1] / len(text))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT_S,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) < 20, f"{float(done.stdout):.0f} bytes of memory per byte of text"
