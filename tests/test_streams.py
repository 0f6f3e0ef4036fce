"""Where the output goes (issue 27 #2, #9): a standard output that is full or closed is one line
on stderr and exit 2, never a traceback; a reader that goes away (``| head``) ends the run
quietly; a standard error that cannot be written never changes the exit code; undecodable bytes
of a file name never crash ``fix`` or ``capacity`` under a strict UTF-8 encoding; and
``--write-baseline`` neither overwrites a checked file nor says "written" when it was not.

These run the real command in a subprocess (the streams are the process's own), each bounded by
a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

TIMEOUT = 60
REMOVED = "model: org/m\nswap-space: 4\n"  # one SITS204 finding with a fix
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")


def _run(args, cwd: Path, *, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=None, shell_redirect: str = ""):
    command = [sys.executable, "-m", "sits_doctor", *args]
    if shell_redirect:  # e.g. '>&-' : the descriptor closed before Python starts
        command = ["bash", "-c", f'exec "$@" {shell_redirect}', "sits-doctor", *command]
    return subprocess.run(command, cwd=cwd, stdout=stdout, stderr=stderr, timeout=TIMEOUT,
                          env={**os.environ, **(env or {})})


def _stream(folder: Path, documents: int) -> None:
    """stream.yaml: ``documents`` Deployments with two findings each (about 1 KB of report each)."""
    doc = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d{i}\nspec:\n  template:\n    spec:\n"
           "      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.19.0\n"
           "          args: [\"--model\", \"org/m\", \"--swap-space\", \"4\", \"--disable-log-requests\"]\n")
    (folder / "stream.yaml").write_text("---\n".join(doc.format(i=i) for i in range(documents)), encoding="utf-8")


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "vllm.yaml").write_text(REMOVED, encoding="utf-8")
    return tmp_path


@needs_dev_full
@pytest.mark.parametrize("args", [
    ["check", "vllm.yaml", "--isolated"], ["check", "vllm.yaml", "--isolated", "--format", "json"],
    ["fix", "vllm.yaml", "--isolated"], ["capacity", "vllm.yaml", "--isolated", "--gpu", "H100"],
    ["rules"], ["explain", "SITS204"], ["check", "-h"], ["--version"],
])
def test_full_stdout_is_exit_2_with_a_message(folder, args):
    with open("/dev/full", "wb") as full:
        done = _run(args, folder, stdout=full)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and "cannot write to standard output: No space left on device" in err


def test_closed_stdout_is_exit_2_with_a_message(folder):
    done = _run(["check", "vllm.yaml", "--isolated"], folder, shell_redirect=">&-")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and "cannot write to standard output" in err


@needs_dev_full
@pytest.mark.parametrize("args, code", [
    (["check", "missing.yaml", "--isolated"], 2),  # unusable input
    (["check", "vllm.yaml", "--isolated"], 1),  # findings (the notes go to stderr)
    (["fix", "missing.yaml", "--isolated"], 2),
    (["check", "--no-such-option"], 2),
])
def test_full_stderr_keeps_the_exit_code(folder, args, code):
    with open("/dev/full", "wb") as full:
        done = _run(args, folder, stderr=full)
    assert done.returncode == code


def test_closed_stderr_keeps_the_exit_code(folder):
    assert _run(["check", "missing.yaml", "--isolated"], folder, shell_redirect="2>&-").returncode == 2


def test_reader_that_goes_away_ends_the_run_quietly(tmp_path):
    """``sits-doctor check ... | head -1`` on a report far larger than a pipe holds."""
    _stream(tmp_path, 400)
    proc = subprocess.Popen([sys.executable, "-m", "sits_doctor", "check", "stream.yaml", "--isolated"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert first.startswith(b"stream.yaml:")
    assert code == 141 and "Traceback" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_non_blocking_stdout_gets_every_byte(tmp_path, unbuffered):
    """A pipe the parent left non-blocking (CI runners do) and a reader slower than the writer:
    the whole report arrives, as it does in a file (with PYTHONUNBUFFERED=1 the short writes were
    dropped silently; without it, BlockingIOError)."""
    import fcntl
    import time

    _stream(tmp_path, 300)
    args = ["check", "stream.yaml", "--isolated"]
    env = {"PYTHONUNBUFFERED": unbuffered}
    with open(tmp_path / "report.txt", "wb") as fh:
        expected = _run(args, tmp_path, stdout=fh, env=env).returncode, (tmp_path / "report.txt").read_bytes()
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    proc = subprocess.Popen([sys.executable, "-m", "sits_doctor", *args], cwd=tmp_path, stdout=write_end,
                            stderr=subprocess.DEVNULL, env={**os.environ, **env})
    os.close(write_end)
    chunks = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            chunk = os.read(read_end, 16384)
            if not chunk:
                break
            chunks.append(chunk)
            time.sleep(0.002)
        code = proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
        os.close(read_end)
    assert (code, b"".join(chunks)) == expected
    assert len(expected[1]) > 200_000  # far more than a pipe holds


@pytest.mark.parametrize("command", [["check"], ["fix"], ["capacity", "--gpu", "H100"], ["fix", "--apply"]])
def test_undecodable_file_name_under_strict_utf8(tmp_path, command):
    """A file name with a byte that is not UTF-8, printed where the encoding refuses lone surrogates:
    the byte is shown as ``\\xff`` (as ``check`` always did), no crash."""
    folder = os.fsencode(tmp_path) + b"/conf\xff"
    os.mkdir(folder)
    with open(folder + b"/vllm.yaml", "w", encoding="utf-8") as fh:
        fh.write(REMOVED)
    done = _run([*command, os.fsdecode(folder), "--isolated"], tmp_path, env={"PYTHONIOENCODING": "utf-8:strict"})
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode in (0, 1), err
    assert "Traceback" not in err and "conf\\xff" in out


# --------------------------------------------------------------------------- --write-baseline


def test_write_baseline_refuses_a_checked_file(tmp_path):
    target = tmp_path / "vllm.yaml"
    target.write_text(REMOVED, encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to("vllm.yaml")
    for given, checked in (("vllm.yaml", "vllm.yaml"), ("link.yaml", "vllm.yaml"), ("vllm.yaml", ".")):
        result = run_cli("check", checked, "--isolated", "--write-baseline", given, cwd=tmp_path)
        assert result.exit_code == 2, (given, checked)
        assert "refusing to write the baseline over a file being checked" in result.stderr
        assert "baseline written" not in result.stderr
        assert target.read_text(encoding="utf-8") == REMOVED


def test_failed_baseline_write_is_an_error_not_written(tmp_path):
    (tmp_path / "vllm.yaml").write_text(REMOVED, encoding="utf-8")
    result = run_cli("check", "vllm.yaml", "--isolated", "--write-baseline", "no/such/folder/b.json", cwd=tmp_path)
    assert result.exit_code == 2
    assert "no/such/folder/b.json: error: cannot write the baseline" in result.stderr
    assert "baseline written" not in result.stderr


def test_baseline_still_written_and_read(tmp_path):
    (tmp_path / "vllm.yaml").write_text(REMOVED, encoding="utf-8")
    wrote = run_cli("check", "vllm.yaml", "--isolated", "--write-baseline", "b.json", cwd=tmp_path)
    assert wrote.exit_code == 1 and "b.json: note: baseline written with 1 finding(s)" in wrote.stderr
    assert run_cli("check", "vllm.yaml", "--isolated", "--baseline", "b.json", cwd=tmp_path).exit_code == 0
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left
