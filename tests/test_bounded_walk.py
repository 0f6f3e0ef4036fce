"""A directory walk says what it could not read, and nothing it meets can hang it.

Issue 27 #6: a folder the walk could not list (no permission, a path over PATH_MAX) was left out
without a word and the run exited 0; a file swapped for a FIFO between the walk's look at it and
its read blocked the run forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli

SERVE = "model: sits-doctor-test/not-a-cached-model\nswap-space: 4\n"  # one SITS204 finding at 2:1
TIMEOUT_S = 60


def _deep_folder(root: Path, depth: int = 24) -> str:
    """A chain of folders whose path is longer than PATH_MAX (4096), built through descriptors
    (no path that long is ever passed to the system), with a config at the bottom; returns the
    chain's name as the walk shows it."""
    name = "d" * 200
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        out = os.open("serve.yaml", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, SERVE.encode())
        os.close(out)
    finally:
        os.close(fd)
    return "/".join([name] * depth)


def test_a_folder_past_path_max_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "serve.yaml").write_text(SERVE)
    _deep_folder(tmp_path / "tree")
    r = run_cli("check", "--isolated", "--target", "vllm==0.20.0", "tree", cwd=tmp_path)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "tree/serve.yaml:2:1: SITS204" in r.stdout  # the rest of the tree is still checked
    errors = [line for line in r.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith("tree/dddd"), r.stderr
    assert errors[0].endswith(": error: cannot read folder: File name too long"), errors[0][-200:]


def test_a_folder_without_permission_is_an_error(tmp_path: Path, monkeypatch) -> None:
    """Listing refused (as for a non-root user on a chmod 000 folder; simulated, so that the test
    means the same when it runs as root)."""
    (tmp_path / "tree" / "locked").mkdir(parents=True)
    (tmp_path / "tree" / "locked" / "serve.yaml").write_text(SERVE)
    (tmp_path / "tree" / "serve.yaml").write_text(SERVE)
    real = os.scandir

    def scandir(path="."):
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r = run_cli("check", "--isolated", "--target", "vllm==0.20.0", "tree", cwd=tmp_path)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "tree/serve.yaml:2:1: SITS204" in r.stdout
    assert "tree/locked: error: cannot read folder: Permission denied" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 folder")
def test_a_chmod_000_folder_is_an_error(tmp_path: Path) -> None:
    locked = tmp_path / "tree" / "locked"
    locked.mkdir(parents=True)
    (tmp_path / "tree" / "serve.yaml").write_text(SERVE)
    locked.chmod(0)
    try:
        r = run_cli("check", "--isolated", "--target", "vllm==0.20.0", "tree", cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    assert r.exit_code == 2
    assert "tree/locked: error: cannot read folder: Permission denied" in r.stderr


# The FIFO is the file the walk found; ``os.stat`` (which every look at a path's type goes
# through) is made to answer for it as for a regular file, as it would have a moment before the
# file was swapped. What is opened must still be checked.
_SWAPPED = """
import os, sys
fifo = os.path.realpath(sys.argv[1])
regular = os.stat(sys.argv[2])
real_stat = os.stat

def stat(path, *args, **kwargs):
    if not isinstance(path, int) and os.path.realpath(path) == fifo:
        return regular
    return real_stat(path, *args, **kwargs)

os.stat = stat
from sits_doctor.cli import main
main(["check", "--isolated", "--target", "vllm==0.20.0", *sys.argv[3:]])
"""


@pytest.mark.parametrize("named", [False, True], ids=["walked", "named"])
def test_a_file_swapped_for_a_fifo_after_it_was_looked_at_does_not_hang(tmp_path: Path, named: bool) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "serve.yaml").write_text(SERVE)
    os.mkfifo(tree / "swapped.yaml")
    paths = ["tree/swapped.yaml", "tree/serve.yaml"] if named else ["tree"]
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SWAPPED), "tree/swapped.yaml", "tree/serve.yaml",
                               *paths], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still blocked opening the FIFO after {TIMEOUT_S} s")
    assert "Traceback" not in done.stderr, done.stderr
    assert "tree/serve.yaml:2:1: SITS204" in done.stdout, done.stdout + done.stderr
    said = "error" if named else "note: skipped"
    assert f"tree/swapped.yaml: {said}: cannot read: a named pipe (FIFO), not a config file" in done.stderr, done.stderr
    assert done.returncode == (2 if named else 1), done.stderr
