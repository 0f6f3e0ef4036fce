"""The hooks of ``.pre-commit-hooks.yaml``, run the way a user's pre-commit runs them:
``pre-commit try-repo`` installs this repository into a fresh hook environment (pip, from the
package index) and runs the hook on copies of committed fixtures in a throwaway git repository.

The repository under test is a snapshot of this checkout's files (tracked and untracked, not
ignored), committed once per module, so the hook environment is built once and local edits are
tested too. Those tests skip only when git or pre-commit is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, REPO

DOCS = REPO / "docs" / "ci.md"

BAD = FIXTURES / "k8s" / "bad_statefulset_sh_c.yaml"  # two SITS204 errors (image pins vLLM 0.11.0)
FIXABLE = FIXTURES / "k8s" / "bad_deployment_removed_flags.yaml"  # removed flags: safe fixes remove them
GOOD = FIXTURES / "k8s" / "good_deployment_args.yaml"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "sits-doctor tests", "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "sits-doctor tests", "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def test_hooks_file_declares_check_and_fix():
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert [(h["id"], h["entry"], h["language"], h["types"], h["require_serial"]) for h in hooks] == [
        ("sits-doctor", "sits-doctor check --skip-unrecognized", "python", ["text"], False),
        ("sits-doctor-fix", "sits-doctor fix --apply --exit-non-zero-on-fix --skip-unrecognized", "python", ["text"], False),
    ]


@pytest.mark.parametrize("name, passed", [
    ("deploy/serve.yaml", True), ("values.yml", True), ("config.json", True), ("start.sh", True),
    ("run.bash", True), ("jobs/serve.sbatch", True), ("Dockerfile", True), ("docker/Dockerfile.cuda", True), ("api.Dockerfile", True),
    ("Containerfile", True), ("models/llama/config.pbtxt", True), ("scripts/entrypoint", True),  # #! scripts
    ("README.md", False), ("notes.txt", False), ("setup.cfg", False), ("src/app.py", False),
])
def test_the_hooks_get_every_format_sits_doctor_reads(name, passed):
    """The files regex pre-commit matches (with `types: [text]`): every format the loaders read,
    shell scripts without a suffix included (the loader tells them by their #! line)."""
    import re

    for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")):
        assert bool(re.search(hook["files"], name)) is passed, (hook["id"], name)


def test_the_documented_config_names_these_hooks():
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]
    config = yaml.safe_load(block)
    declared = {h["id"] for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert [h["id"] for h in config["repos"][0]["hooks"]] == ["sits-doctor", "sits-doctor-fix"]
    assert {h["id"] for h in config["repos"][0]["hooks"]} <= declared


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This checkout's files, committed in a repository of their own (skips the test when git or
    pre-commit is not installed)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if importlib.util.find_spec("pre_commit") is None:
        pytest.skip("pre-commit is not installed")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() and not name.endswith(".whl"):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "snapshot", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path, hook_repo) -> Path:
    """A user's repository, where the hooks run."""
    git("init", "-q", cwd=tmp_path)
    return tmp_path


def try_repo(hook_repo: Path, home: Path, project: Path, hook: str, *files: str) -> subprocess.CompletedProcess:
    git("add", *files, cwd=project)
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), hook, "--color", "never", "--files", *files],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )


def copy(fixture: Path, project: Path, name: str) -> Path:
    target = project / name
    shutil.copyfile(fixture, target)
    return target


def test_check_hook_fails_on_a_bad_config_and_names_the_finding(hook_repo, pre_commit_home, project):
    copy(BAD, project, "statefulset.yaml")
    run = try_repo(hook_repo, pre_commit_home, project, "sits-doctor", "statefulset.yaml")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "sits-doctor" in run.stdout and "Failed" in run.stdout
    assert "statefulset.yaml:25:17: SITS204 [error] --max-seq-len-to-capture was removed in vLLM 0.11.0" in run.stdout
    assert "statefulset.yaml:26:17: SITS204 [error] --num-scheduler-steps was removed in vLLM 0.10.1" in run.stdout


def test_check_hook_passes_on_a_good_config(hook_repo, pre_commit_home, project):
    copy(GOOD, project, "deployment.yaml")
    run = try_repo(hook_repo, pre_commit_home, project, "sits-doctor", "deployment.yaml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout


def test_check_hook_ignores_json_and_yaml_that_are_not_deployment_configs(hook_repo, pre_commit_home, project):
    copy(GOOD, project, "deployment.yaml")
    (project / "package.json").write_text('{"name": "web", "version": "1.0.0"}\n', encoding="utf-8")
    (project / "ci.yaml").write_text("on: push\njobs: {}\n", encoding="utf-8")
    run = try_repo(hook_repo, pre_commit_home, project, "sits-doctor", "deployment.yaml", "package.json", "ci.yaml")
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture
def fix_available():
    sits_doctor = [sys.executable, "-m", "sits_doctor"]
    if subprocess.run([*sits_doctor, "fix", "--help"], capture_output=True).returncode != 0:
        pytest.skip("fix command not yet available")


def test_fix_hook_rewrites_a_fixable_config_and_fails_so_it_is_reviewed(hook_repo, pre_commit_home, project, fix_available):
    target = copy(FIXABLE, project, "deployment.yaml")
    run = try_repo(hook_repo, pre_commit_home, project, "sits-doctor-fix", "deployment.yaml")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "files were modified by this hook" in run.stdout
    before, after = FIXABLE.read_text(encoding="utf-8"), target.read_text(encoding="utf-8")
    assert "--swap-space" in before and "--swap-space" not in after
    assert "--disable-log-requests" in before and "--disable-log-requests" not in after
    assert after.count("\n") == before.count("\n") - 3  # the two flags and the value of one


def test_fix_hook_passes_and_changes_nothing_on_a_good_config(hook_repo, pre_commit_home, project, fix_available):
    target = copy(GOOD, project, "deployment.yaml")
    run = try_repo(hook_repo, pre_commit_home, project, "sits-doctor-fix", "deployment.yaml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert target.read_bytes() == GOOD.read_bytes()
