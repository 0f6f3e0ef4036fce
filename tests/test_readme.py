"""The README's rule table matches the registry, and its two commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

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
