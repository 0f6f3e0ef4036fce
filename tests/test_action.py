"""action.yml, the composite GitHub Action: its structure as GitHub reads it, and what its shell
steps do, run with bash against a stand-in ``sits-doctor`` that records its arguments."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@pytest.fixture(scope="module")
def action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))


def step(action: dict, name: str) -> dict:
    return next(s for s in action["runs"]["steps"] if s["name"] == name)


def expressions(node) -> list[str]:
    if isinstance(node, dict):
        return [e for v in node.values() for e in expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in expressions(v)]
    return EXPRESSION.findall(node) if isinstance(node, str) else []


def test_it_is_a_composite_action_with_these_inputs(action):
    assert action["runs"]["using"] == "composite"
    assert {name: spec.get("default") for name, spec in action["inputs"].items()} == {
        "paths": ".", "fail-on": "warning", "sarif": "true", "args": "", "version": "",
    }
    assert all(spec["description"] and spec["required"] is False for spec in action["inputs"].values())


def test_steps_in_order(action):
    assert [(s["name"], s.get("uses"), s.get("if")) for s in action["runs"]["steps"]] == [
        ("Install sits-doctor", None, None),
        ("Check (SARIF report)", None, "inputs.sarif == 'true'"),
        ("Upload to code scanning", "github/codeql-action/upload-sarif@v3", "inputs.sarif == 'true'"),
        ("Check (annotations, fail on ${{ inputs.fail-on }})", None, None),
    ]
    assert step(action, "Upload to code scanning")["with"] == {"sarif_file": "sits-doctor.sarif", "category": "sits-doctor"}


def test_every_command_step_names_its_shell_and_every_step_does_one_thing(action):
    for s in action["runs"]["steps"]:
        assert ("run" in s) != ("uses" in s), s["name"]
        if "run" in s:
            assert s["shell"] == "bash", s["name"]


def test_every_input_used_is_declared_and_every_declared_input_is_used(action):
    used = {m for e in expressions(action) for m in re.findall(r"\binputs\.([A-Za-z0-9_-]+)", e)}
    used |= {m for s in action["runs"]["steps"] for m in re.findall(r"\binputs\.([A-Za-z0-9_-]+)", s.get("if", ""))}
    assert used == set(action["inputs"])


def test_scripts_take_inputs_from_the_environment_never_from_expressions(action):
    # ${{ }} inside a script is pasted into the shell text: an input could inject commands.
    for s in action["runs"]["steps"]:
        if "run" in s:
            assert "${{" not in s["run"], s["name"]


def test_install_defaults_to_the_actions_own_checkout(action):
    assert step(action, "Install sits-doctor")["env"] == {"SPEC": "${{ inputs.version || github.action_path }}"}


def test_the_output_points_at_the_sarif_step(action):
    assert action["outputs"]["sarif-file"]["value"] == "${{ steps.sarif.outputs.file }}"
    assert step(action, "Check (SARIF report)")["id"] == "sarif"


def test_the_documented_workflow_passes_only_declared_inputs(action):
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    block = text.split("# .github/workflows/sits-doctor.yml\n", 1)[1].split("```", 1)[0]
    workflow = yaml.safe_load(block)
    steps = workflow["jobs"]["sits-doctor"]["steps"]
    ours = [s for s in steps if s.get("uses", "").startswith("OWNER/sits-doctor@")]
    assert len(ours) == 1
    assert set(ours[0]["with"]) <= set(action["inputs"])
    assert [s.get("uses", "").split("@")[0] for s in steps[:2]] == ["actions/checkout", "actions/setup-python"]
    assert workflow["permissions"]["security-events"] == "write"


# --- the scripts, run ---------------------------------------------------------------------


@pytest.fixture
def stand_in(tmp_path):
    """A ``sits-doctor`` on PATH that logs its arguments, exits with $STAND_IN_RC, and writes
    the -o file unless $STAND_IN_NO_OUTPUT is set."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "sits-doctor"
    script.write_text(
        "#!/usr/bin/env bash\n"
        'printf "%s\\n" "$*" >> "$STAND_IN_LOG"\n'
        'prev=""; for a in "$@"; do [ "$prev" = "-o" ] && [ -z "$STAND_IN_NO_OUTPUT" ] && echo "{}" > "$a"; prev="$a"; done\n'
        'exit "${STAND_IN_RC:-0}"\n',
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def run_step(action: dict, name: str, tmp_path: Path, stand_in: Path, rc: int, **env: str):
    """Run a step's script as GitHub runs a bash step (bash --noprofile --norc -eo pipefail)."""
    s = step(action, name)
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    script = tmp_path / "step.sh"
    script.write_text(s["run"], encoding="utf-8")
    log, output = tmp_path / "calls.log", tmp_path / "github_output"
    log.write_text("")
    output.write_text("")
    full_env = {
        **os.environ, "PATH": f"{stand_in}{os.pathsep}{os.environ['PATH']}", "STAND_IN_LOG": str(log),
        "STAND_IN_RC": str(rc), "GITHUB_OUTPUT": str(output), **env,
    }
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          cwd=workdir, env=full_env, capture_output=True, text=True)
    return done, log.read_text().splitlines(), output.read_text()


@pytest.mark.parametrize("rc", [0, 1, 2])
def test_sarif_step_goes_on_after_findings_so_the_report_is_uploaded(action, tmp_path, stand_in, rc):
    done, calls, output = run_step(action, "Check (SARIF report)", tmp_path, stand_in, rc,
                                   PATHS="deploy models/genai_config.json", ARGS="--target vllm==0.11")
    assert done.returncode == 0, done.stderr
    assert calls == ["check deploy models/genai_config.json --target vllm==0.11 --format sarif -o sits-doctor.sarif"]
    assert output == "file=sits-doctor.sarif\n"


def test_sarif_step_stops_on_an_internal_error(action, tmp_path, stand_in):
    done, _, output = run_step(action, "Check (SARIF report)", tmp_path, stand_in, 3, PATHS=".", ARGS="")
    assert done.returncode == 3
    assert "::error title=sits-doctor::sits-doctor check exited 3 without a SARIF report" in done.stdout
    assert output == ""


def test_sarif_step_stops_when_no_report_was_written(action, tmp_path, stand_in):
    done, _, output = run_step(action, "Check (SARIF report)", tmp_path, stand_in, 2, PATHS=".", ARGS="", STAND_IN_NO_OUTPUT="1")
    assert done.returncode == 2
    assert output == ""


@pytest.mark.parametrize("rc", [0, 1, 2])
def test_gate_step_fails_exactly_when_the_check_does(action, tmp_path, stand_in, rc):
    done, calls, _ = run_step(action, "Check (annotations, fail on ${{ inputs.fail-on }})", tmp_path, stand_in, rc,
                              PATHS=".", ARGS="--baseline sits-doctor-baseline.json", FAIL_ON="error")
    assert done.returncode == rc
    assert calls == ["check . --baseline sits-doctor-baseline.json --format github --fail-on error"]


def test_install_step_installs_the_spec(action, tmp_path, stand_in):
    pip_log = tmp_path / "pip.log"
    python = stand_in / "python"
    python.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> {pip_log}\n', encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    done, _, _ = run_step(action, "Install sits-doctor", tmp_path, stand_in, 0, SPEC="/actions/sits-doctor")
    assert done.returncode == 0, done.stderr
    assert pip_log.read_text() == "-m pip install --disable-pip-version-check --quiet /actions/sits-doctor\n"
