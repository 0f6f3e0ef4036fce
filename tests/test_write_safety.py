"""`fix --apply` never loses a write, never half-writes a file and never takes what is not its own.

Each hazard is made to happen, not assumed: an edit lands while the temporary file is fsynced; root
fixes a file another user owns; the file is read-only; no temporary file can be made beside it (a
folder the user may not write, a full file system, no inodes left); SIGTERM, SIGHUP and SIGINT
arrive while the temporary file exists (a subprocess holds its fsync open until the test has sent
the signal). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_cli, write
from sits_doctor import fixer
from sits_doctor.engine import CheckOptions

SWAP = "model: ./m\ngpu-memory-utilization: 0.9\nswap-space: 4   # GiB\nserved-model-name: m\n"
FIXED = "model: ./m\ngpu-memory-utilization: 0.9\nserved-model-name: m\n"
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sits-doctor-tmp"))


def _fix(path: Path) -> fixer.FixResult:
    return fixer.fix_paths([str(path)], CheckOptions(isolated=True), apply=True)


def _errors(result: fixer.FixResult) -> list[str]:
    return [e.message for e in result.errors]


# --- an edit that lands while the new text is being written -------------------------------------

def _edit_during_the_first_fsync(monkeypatch, edit):
    real = os.fsync
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 1:  # the temporary file's: someone saves the file meanwhile
            edit()
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_an_edit_that_lands_during_the_fsync_is_kept(tmp_path, hermetic, monkeypatch):
    path = write(tmp_path, "serve.yaml", SWAP)
    theirs = SWAP + "max-num-seqs: 8\n"
    calls = _edit_during_the_first_fsync(monkeypatch, lambda: path.write_text(theirs))
    result = _fix(path)
    assert calls, "the writer never fsynced"
    assert path.read_text() == theirs  # their edit, not our rewrite of the text before it
    assert any("changed while fixing" in m for m in _errors(result)), _errors(result)
    assert _leftovers(tmp_path) == []


def test_a_same_size_edit_with_its_mtime_put_back_is_kept(tmp_path, hermetic, monkeypatch):
    path = write(tmp_path, "serve.yaml", SWAP)
    theirs = SWAP.replace("0.9", "0.8")
    assert len(theirs) == len(SWAP)

    def edit():
        before = os.stat(path)
        with open(path, "r+b") as fh:  # in place: same inode, same size
            fh.write(theirs.encode())
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    _edit_during_the_first_fsync(monkeypatch, edit)
    result = _fix(path)
    assert path.read_text() == theirs
    assert any("changed while fixing" in m for m in _errors(result)), _errors(result)
    assert _leftovers(tmp_path) == []


def test_a_file_replaced_during_the_fsync_is_kept(tmp_path, hermetic, monkeypatch):
    path = write(tmp_path, "serve.yaml", SWAP)
    theirs = {}

    def save_by_rename():  # an editor that saves by rename: a new inode, the same text
        other = tmp_path / "other"
        other.write_text(SWAP)
        os.replace(other, path)
        theirs["inode"] = os.stat(path).st_ino

    _edit_during_the_first_fsync(monkeypatch, save_by_rename)
    result = _fix(path)
    assert os.stat(path).st_ino == theirs["inode"]  # their file, not ours renamed over it
    assert path.read_text() == SWAP
    assert any("changed while fixing" in m for m in _errors(result)), _errors(result)
    assert _leftovers(tmp_path) == []


# --- owner, group and permissions ----------------------------------------------------------------

@pytest.mark.skipif(not ROOT, reason="only root can give a file to another user")
def test_root_keeps_the_owner_and_group_of_a_users_file(tmp_path, hermetic):
    path = write(tmp_path, "serve.yaml", SWAP)
    os.chown(path, 4321, 4322)
    os.chmod(path, 0o640)
    result = _fix(path)
    assert _errors(result) == []
    assert path.read_text() == FIXED
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (4321, 4322, 0o640)


def test_a_read_only_file_is_not_written(tmp_path, hermetic):
    path = write(tmp_path, "serve.yaml", SWAP)
    os.chmod(path, 0o444)
    result = run_cli("fix", "--apply", "--isolated", str(path), cwd=tmp_path)
    assert result.exit_code == 2, result
    assert "read-only" in result.stderr and "not written" in result.stderr, result.stderr
    assert "internal error" not in result.stderr
    assert path.read_text() == SWAP
    assert os.stat(path).st_mode & 0o777 == 0o444
    assert _leftovers(tmp_path) == []


@contextlib.contextmanager
def _as_nobody():
    """Run the block as user ``nobody`` when the tests run as root (root may write anywhere, so
    the refusals below need an ordinary user): the effective ids change, the real ones stay, so
    root takes them back afterwards."""
    if not ROOT:
        yield
        return
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)


def _fix_as_nobody(work: Path, cache: Path, monkeypatch) -> tuple[int, str]:
    """``fix --apply`` of work/serve.yaml as nobody; everything it imports is imported first, as
    root (nobody may not read this interpreter's own folders)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    warm = work.parent / "warm"
    warm.mkdir()
    write(warm, "serve.yaml", SWAP)
    assert run_cli("fix", "--apply", "--isolated", "serve.yaml", cwd=warm).exit_code == 0
    with _as_nobody():
        result = run_cli("fix", "--apply", "--isolated", "serve.yaml", cwd=work)
    return result.exit_code, result.stderr


@pytest.fixture
def shared_dir():
    """A folder every user can reach (pytest's tmp_path is root's alone), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="sits-write-"))
    os.chmod(folder, 0o755)
    (folder / "cache").mkdir(mode=0o755)
    yield folder
    for root, dirs, _ in os.walk(folder):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    os.chmod(folder, 0o755)
    shutil.rmtree(folder)


def test_a_file_the_user_may_not_write_is_not_written(shared_dir, monkeypatch):
    if not ROOT:
        pytest.skip("needs a file owned by another user")
    work = shared_dir / "work"
    work.mkdir(mode=0o777)
    os.chmod(work, 0o777)  # the folder lets anyone rename over the file; the file lets nobody but its owner write
    path = write(work, "serve.yaml", SWAP)
    os.chmod(path, 0o644)
    code, err = _fix_as_nobody(work, shared_dir / "cache", monkeypatch)
    assert code == 2, err
    assert "read-only" in err and "not written" in err, err
    assert "internal error" not in err
    assert path.read_text() == SWAP and os.stat(path).st_uid == 0
    assert _leftovers(work) == []


def test_no_temporary_file_in_a_read_only_folder_is_a_clean_exit_2(shared_dir, monkeypatch):
    work = shared_dir / "work"
    work.mkdir()
    path = write(work, "serve.yaml", SWAP)
    os.chmod(path, 0o666)  # the file may be written; its folder may not
    os.chmod(work, 0o555)
    code, err = _fix_as_nobody(work, shared_dir / "cache", monkeypatch)
    assert code == 2, err
    assert "not written: cannot make a temporary file beside it: Permission denied" in err, err
    assert "internal error" not in err
    assert path.read_text() == SWAP


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EMFILE])
def test_no_temporary_file_is_a_clean_exit_2(tmp_path, hermetic, monkeypatch, code):
    path = write(tmp_path, "serve.yaml", SWAP)

    def mkstemp(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    result = run_cli("fix", "--apply", "--isolated", str(path), cwd=tmp_path)
    assert result.exit_code == 2, result
    assert f"not written: cannot make a temporary file beside it: {os.strerror(code)}" in result.stderr, result.stderr
    assert "internal error" not in result.stderr
    assert path.read_text() == SWAP


def test_a_name_near_the_length_limit_still_gets_a_temporary_file(tmp_path, hermetic):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    path = write(tmp_path, "v" * (limit - len(".yaml")) + ".yaml", SWAP)
    result = _fix(path)
    assert _errors(result) == []
    assert path.read_text() == FIXED
    assert _leftovers(tmp_path) == []


@pytest.fixture
def small_tmpfs(tmp_path):
    """Mount a tmpfs of ``options`` at a fresh folder (root only); unmounted afterwards."""
    mounted = []

    def mount(options: str) -> Path:
        if not ROOT or shutil.which("mount") is None:
            pytest.skip("needs root to mount a tmpfs")
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def test_no_inode_left_is_a_clean_exit_2(small_tmpfs, hermetic):
    fs = small_tmpfs("size=1m,nr_inodes=2")  # the root folder and serve.yaml: nothing more
    path = write(fs, "serve.yaml", SWAP)
    result = run_cli("fix", "--apply", "--isolated", str(path), cwd=fs)
    assert result.exit_code == 2, result
    assert "not written: cannot make a temporary file beside it" in result.stderr, result.stderr
    assert path.read_text() == SWAP


def test_a_full_file_system_is_a_clean_exit_2(small_tmpfs, hermetic):
    fs = small_tmpfs("size=64k")
    path = write(fs, "serve.yaml", SWAP)
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # take every block that is left
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    result = run_cli("fix", "--apply", "--isolated", str(path), cwd=fs)
    assert result.exit_code == 2, result
    assert f"not written: {os.strerror(errno.ENOSPC)}" in result.stderr, result.stderr
    assert "internal error" not in result.stderr
    assert path.read_text() == SWAP
    assert _leftovers(fs) == []


# --- signals while the temporary file exists -----------------------------------------------------

CHILD = r"""
import os, signal, sys, time
marker, release, target, ignore = sys.argv[1:5]
if ignore:
    signal.signal(getattr(signal, ignore), signal.SIG_IGN)  # as nohup does
real = os.fsync
def fsync(fd):
    if not os.path.exists(marker):
        open(marker, "w").close()  # the temporary file exists: tell the test
        deadline = time.monotonic() + 60
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.02)
    real(fd)
os.fsync = fsync
from sits_doctor.cli import main
main(["fix", "--apply", "--isolated", target])
"""


def _fix_and_signal(tmp_path: Path, sig: int, ignore: str = "") -> tuple[subprocess.CompletedProcess, Path]:
    work = tmp_path / "work"
    work.mkdir()
    path = write(work, "serve.yaml", SWAP)
    marker, release = tmp_path / "in-fsync", tmp_path / "release"
    (tmp_path / "cache").mkdir()
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(marker), str(release), str(path), ignore],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the fix never reached its fsync"
            time.sleep(0.02)
        assert _leftovers(work), "the signal must arrive while the temporary file exists"
        proc.send_signal(sig)
        time.sleep(0.2)
        release.touch()  # an ignored signal lets the write go on
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), path


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_remove_the_temporary_file(tmp_path, name):
    sig = getattr(signal, name)
    done, path = _fix_and_signal(tmp_path, sig)
    assert done.returncode == -sig, done  # it still dies of the signal, as its parent expects
    assert "Traceback" not in done.stderr
    assert path.read_text() == SWAP
    assert _leftovers(path.parent) == []


def test_sigint_removes_the_temporary_file_without_a_traceback(tmp_path):
    done, path = _fix_and_signal(tmp_path, signal.SIGINT)
    assert done.returncode == 130, done  # 128 + SIGINT, what a shell reports for Ctrl-C
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert "interrupted" in done.stderr
    assert path.read_text() == SWAP
    assert _leftovers(path.parent) == []


def test_an_ignored_sighup_lets_the_write_finish(tmp_path):
    done, path = _fix_and_signal(tmp_path, signal.SIGHUP, ignore="SIGHUP")
    assert done.returncode == 0, done
    assert path.read_text() == FIXED
    assert _leftovers(path.parent) == []


def test_a_program_that_handles_sigterm_itself_gets_it_and_nothing_is_written(tmp_path, hermetic, monkeypatch):
    path = write(tmp_path, "serve.yaml", SWAP)
    got = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        real = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (os.kill(os.getpid(), signal.SIGTERM), real(fd)))
        result = _fix(path)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert got == [signal.SIGTERM]  # delivered once, to its own handler, after the clean-up
    assert _errors(result) == ["not written: interrupted by SIGTERM"]
    assert path.read_text() == SWAP
    assert _leftovers(tmp_path) == []


def test_the_signal_handlers_are_put_back(tmp_path, hermetic):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    path = write(tmp_path, "serve.yaml", SWAP)
    assert _errors(_fix(path)) == []
    assert path.read_text() == FIXED
    assert {s: signal.getsignal(s) for s in before} == before


def test_ctrl_c_anywhere_in_fix_prints_no_traceback(tmp_path, hermetic, monkeypatch, capsys):
    from sits_doctor import cli

    path = write(tmp_path, "serve.yaml", SWAP)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fixer, "check", interrupted)
    try:
        cli.main(["fix", "--apply", "--isolated", str(path)])
    except KeyboardInterrupt:  # (not let through: it would stop the whole test run)
        pytest.fail("KeyboardInterrupt came out of sits-doctor's entry point")
    except SystemExit as exc:
        assert exc.code == 130
    else:
        pytest.fail("main() returned instead of exiting")
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    assert path.read_text() == SWAP
