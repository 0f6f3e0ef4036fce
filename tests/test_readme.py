"""The README's rule table matches the registry, and its two commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sits_doctor.rules import RULES

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_rule_table_matches_registry():
    table = README.split("<!-- rules:start -->", 1)[1].split("<!-- rules:end -->", 1)[0]
    rows = [line for line in table.strip().splitlines()[2:] if line.startswith("|")]
    expected = [
        f"| {m.RULE.code} | {m.RULE.name} | {m.RULE.severity.value} | {', '.join(m.RULE.frameworks)} | {m.RULE.summary} |"
        for m in RULES
    ]
    assert rows == expected


def test_exactly_two_setup_and_run_commands_and_ci_runs_the_test_one():
    commands = re.findall(r"```sh\n(.*?)\n```", README, re.DOTALL)
    assert len(commands) == 2, commands
    demo, tests = commands
    assert "sits-doctor check" in demo and "pip install" in demo
    assert "pytest" in tests
    assert tests in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_sample_output_is_what_the_command_prints(hermetic, update_snapshots):
    """The README's sample is real output (rewritten with --update-snapshots)."""
    from conftest import run_cli

    block = README.split("<!-- sample:start -->", 1)[1].split("<!-- sample:end -->", 1)[0]
    body = block.strip().removeprefix("```text\n").removesuffix("```").rstrip("\n")
    command, _, shown = body.partition("\n")
    assert command.startswith("$ sits-doctor ")
    args = command.removeprefix("$ sits-doctor ").split()
    result = run_cli(*args, cwd=REPO, env={"NO_COLOR": "1"})
    assert result.exit_code == 1
    if update_snapshots:
        new_block = f"\n```text\n{command}\n{result.stdout.rstrip()}\n```\n"
        (REPO / "README.md").write_text(README.replace(block, new_block), encoding="utf-8")
        return
    assert shown == result.stdout.rstrip()


def _transcript(marker: str) -> tuple[str, str]:
    block = README.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    return block, block.strip().removeprefix("```text\n").removesuffix("```").rstrip("\n")


def _play(body: str, cwd: Path) -> str:
    """Run each ``$ `` line of a transcript in ``cwd``; return the transcript with real output
    (stdout, then stderr)."""
    import shlex
    import shutil

    from conftest import run_cli

    out = []
    for line in body.splitlines():
        if not line.startswith("$ "):
            continue
        out.append(line)
        words = shlex.split(line[2:])
        if words[0] == "cp":
            shutil.copy(cwd / words[1], cwd / words[2])
            continue
        if words[0] == "printf":  # printf 'TEXT' > FILE (the escapes of printf's format)
            (cwd / words[3]).write_text(words[1].encode().decode("unicode_escape"), encoding="utf-8")
            continue
        assert words[0] == "sits-doctor"
        result = run_cli(*words[1:], cwd=cwd, env={"NO_COLOR": "1"})
        assert result.exit_code in (0, 1, 2), result.stderr
        both = (result.stdout.rstrip() + "\n" + result.stderr.rstrip()).strip("\n")
        if both:
            out.append(both)
    return "\n".join(out)


@pytest.mark.parametrize("marker", ["fix-sample", "apply-sample", "input-errors", "capacity-sample"])
def test_fix_samples_are_what_the_commands_print(marker, hermetic, tmp_path, update_snapshots):
    """The README's fix transcripts are real output, run on a copy of fixtures/."""
    import shutil

    shutil.copytree(REPO / "fixtures", tmp_path / "fixtures")
    block, body = _transcript(marker)
    played = _play(body, tmp_path)
    if update_snapshots:
        text = (REPO / "README.md").read_text(encoding="utf-8")
        (REPO / "README.md").write_text(text.replace(block, f"\n```text\n{played}\n```\n"), encoding="utf-8")
        return
    assert body == played
