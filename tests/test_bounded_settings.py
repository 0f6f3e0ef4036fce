"""Settings files that are deeply nested or hold a value of the wrong type are located errors.

Issue 27 #10: a deeply nested ``.sits-doctor.toml`` (or ``pyproject.toml``, or ignore file) ended
in RecursionError (exit 3); ``tool = 1`` in a ``pyproject.toml`` crashed on ``.get``; a wrong type
was reported at column 1 of the line, or with no line when the key sat in an inline table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

SERVE = "model: sits-doctor-test/not-a-cached-model\nswap-space: 4\n"
DEPTH = 50_000


def check(tmp_path: Path, *options: str):
    (tmp_path / "serve.yaml").write_text(SERVE)
    r = run_cli("check", "serve.yaml", "--target", "vllm==0.20.0", *options, cwd=tmp_path)
    both = r.stdout + r.stderr
    assert "Traceback" not in both and "internal error" not in both, both
    return r


NESTED = {
    "array": "x = " + "[" * DEPTH + "]" * DEPTH,
    "inline table": "x = " + "{a = " * DEPTH + "1" + "}" * DEPTH,
}


@pytest.mark.parametrize("shape", sorted(NESTED))
@pytest.mark.parametrize("name", [".sits-doctor.toml", "pyproject.toml", ".sits-doctor-ignore.toml"])
def test_deep_toml_nesting_is_refused_where_it_passes_the_limit(tmp_path: Path, name: str, shape: str) -> None:
    from sits_doctor.source import MAX_DEPTH

    head = "[tool.sits-doctor]\n" if name == "pyproject.toml" else ""
    (tmp_path / name).write_text(f'{head}note = "[[[[ {{{{ not nesting"  # [[[[\n{NESTED[shape]}\n')
    r = check(tmp_path)
    assert r.exit_code == 2, r.stderr
    line = 3 if head else 2
    col = len("x = ") + MAX_DEPTH + 1 if shape == "array" else len("x = ") + len("{a = ") * MAX_DEPTH + 1
    assert f"{name}:{line}:{col}: error: nested deeper than {MAX_DEPTH} levels" in r.stderr, r.stderr


def test_deep_toml_given_as_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "deep.toml").write_text(NESTED["array"])
    r = check(tmp_path, "--config", "deep.toml")
    assert r.exit_code == 2
    assert "deep.toml:1:105: error: nested deeper than 100 levels" in r.stderr, r.stderr


def test_toml_strings_and_comments_do_not_count_as_nesting(tmp_path: Path) -> None:
    brackets = "[" * 500
    (tmp_path / ".sits-doctor.toml").write_text(
        f'# {brackets}\nextend-exclude = ["{brackets}", \'{brackets}\', """\n{brackets}\n""", \'\'\'{brackets}\'\'\']\n')
    r = check(tmp_path)
    assert r.exit_code == 1, r.stderr  # the settings are read; the finding is reported
    assert "serve.yaml:2:1: SITS204" in r.stdout


WRONG = [  # (pyproject.toml text, line, col, words of the message)
    ("tool = 1\n", 1, 1, "'tool' must be a table, not a number"),
    ('tool = "sits-doctor"\n', 1, 1, "'tool' must be a table, not a string"),
    ("[tool]\nsits-doctor = 1\n", 2, 1, "[tool.sits-doctor] must be a table, not a number"),
    ("[tool]\nsits-doctor = [1]\n", 2, 1, "[tool.sits-doctor] must be a table, not an array"),
    ("[tool.sits-doctor]\n  gpu = 1\n", 2, 3, "gpu: Input should be a valid string"),
    ('[tool.sits-doctor]\nselect = ["SITS204"]\n    fail-on = 3\n', 3, 5, "fail-on: Input should be"),
    ("tool = {sits-doctor = {gpu = 5}}\n", 1, 24, "gpu: Input should be a valid string"),
]


@pytest.mark.parametrize("text, line, col, words", WRONG, ids=[w[0].strip() for w in WRONG])
def test_a_wrong_type_in_pyproject_is_a_located_error(tmp_path: Path, text: str, line: int, col: int, words: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    r = check(tmp_path, "--config", "pyproject.toml")
    assert r.exit_code == 2, r.stderr
    assert f"pyproject.toml:{line}:{col}: error: " in r.stderr and words in r.stderr, r.stderr


def test_a_wrong_type_in_a_discovered_pyproject_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.sits-doctor]\n  ignore = "SITS204"\n')
    r = check(tmp_path)
    assert r.exit_code == 2, r.stderr
    assert "pyproject.toml:5:3: error: invalid sits-doctor settings: ignore: Input should be a valid list" in r.stderr


def test_an_ignore_glob_no_regex_accepts_is_a_located_error(tmp_path: Path) -> None:
    """``path = "[z-a]"`` raised re.error out of the suppression pass (exit 3)."""
    (tmp_path / ".sits-doctor-ignore.toml").write_text(
        '[[ignore]]\npointer = ""\n  path = "[z-a]"\ncode = "SITS204"\nreason = "why"\n')
    r = check(tmp_path)
    assert r.exit_code == 2, r.stderr
    assert ".sits-doctor-ignore.toml:3:3: error: [[ignore]] entry 1: 'path' '[z-a]' is not a glob" in r.stderr, r.stderr
