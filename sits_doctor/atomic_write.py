"""Replacing a file on disk: the one write routine, which never loses an edit or half-writes a file.

:func:`replace_file` reads the file (a regular file only: never a FIFO or a device, never through a
symlink), asks the caller what to write instead (the caller refuses when the text is no longer the
one it checked), and then:

- refuses a read-only file: one this user may not write, or one with no write bit at all (root may
  write anything, but a file made read-only stays so), as ruff and prettier do;
- writes a temporary file in the same folder, flushed and fsynced, with the original's owner and
  group (kept when root fixes another user's file; refused when they cannot be kept) and mode;
- just before the rename, checks that the file is still the one it read (device, inode, size,
  mtime and ctime, and its bytes): an edit saved while the new text was written is never lost;
- renames it over the original and fsyncs the folder.

Whatever stops it — an error, no room for a temporary file, SIGTERM, SIGHUP, Ctrl-C — removes the
temporary file. A problem with the file or its folder is an :class:`InputError` ("not written:
...", exit 2). A signal that arrives while the temporary file exists is held until the file is
removed, then delivered as it would have been (SIGTERM and SIGHUP still end the process; an
ignored one stays ignored, so ``nohup`` runs finish the write).
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import Callable

from sits_doctor.errors import InputError

TEMP_SUFFIX = ".sits-doctor-tmp"
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
CHANGED = "the file changed while fixing; run fix again"


def replace_file(path: Path, shown: str, rewrite: Callable[[bytes], bytes], limit: int) -> None:
    """Replace the file at ``path`` (resolved; ``shown`` in messages) with ``rewrite(its bytes)``.
    ``limit``: read at most this many bytes (and one more, so ``rewrite`` sees a longer file as
    changed). ``rewrite`` raises :class:`InputError` to refuse."""
    try:
        raw, before = _read(path, limit)
    except OSError as exc:
        raise InputError(shown, f"not written: cannot read it again: {_reason(exc)}") from None
    if not stat.S_ISREG(before.st_mode):
        raise InputError(shown, "not written: it is no longer a regular file")
    data = rewrite(raw)
    if not before.st_mode & 0o222 or not _may_write(path):
        raise InputError(shown, "not written: the file is read-only (make it writable to fix it)")
    done = False
    with _HeldSignals() as held:
        tmp = None
        try:
            mask = _block_signals()  # so that no signal falls between its creation and `tmp` knowing it
            try:
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=TEMP_SUFFIX)
            except OSError as exc:
                raise InputError(shown, f"not written: cannot make a temporary file beside it: {_reason(exc)}") from None
            finally:
                _unblock_signals(mask)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                _keep_owner(fh.fileno(), before, shown)
                _keep_mode(fh.fileno(), tmp, before)
                os.fsync(fh.fileno())
            _before_rename(tmp, path)
            if not _unchanged(path, before, raw, limit):
                raise InputError(shown, f"not written: {CHANGED}")
            os.replace(tmp, path)
            tmp, done = None, True
        except BaseException as exc:
            held.hold()  # a second signal waits until the temporary file is gone
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if isinstance(exc, OSError):
                raise InputError(shown, f"not written: {_reason(exc)}") from None
            raise
    if held.delivered and not done:  # the signal's own handler ran and returned: the write is off all the same
        raise InputError(shown, f"not written: interrupted by {signal.Signals(held.delivered[0]).name}")
    _sync_folder(path.parent)


def _block_signals():
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)


def _unblock_signals(mask) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _read(path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    fd = os.open(path, _READ_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b"", info
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)


def _may_write(path: Path) -> bool:
    if os.access in os.supports_effective_ids:
        return os.access(path, os.W_OK, effective_ids=True)
    return os.access(path, os.W_OK)


def _keep_owner(fd: int, before: os.stat_result, shown: str) -> None:
    """Give the temporary file the original's owner and group; refuse when that is not allowed
    (a user rewriting another user's file would take it over)."""
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) == (before.st_uid, before.st_gid) or not hasattr(os, "fchown"):
        return
    try:
        os.fchown(fd, before.st_uid, before.st_gid)
        return
    except PermissionError:
        pass
    if now.st_uid == before.st_uid:
        try:
            os.fchown(fd, -1, before.st_gid)  # a group the user belongs to
            return
        except PermissionError:
            pass
    raise InputError(shown, f"not written: a rewrite could not keep its owner and group "
                            f"({before.st_uid}:{before.st_gid}); fix it as that user")


def _keep_mode(fd: int, tmp: str, before: os.stat_result) -> None:
    mode = stat.S_IMODE(before.st_mode)  # after the owner: chown clears set-user-ID and set-group-ID
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:  # pragma: no cover - Windows before Python 3.13
        os.chmod(tmp, mode)


def _unchanged(path: Path, before: os.stat_result, raw: bytes, limit: int) -> bool:
    """Whether ``path`` is still the file read as ``raw``: the same inode, size and times, and
    (mtimes are coarse: two saves in one clock tick share one) the same bytes."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    same = lambda s: (s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_mode)  # noqa: E731
    if same(now) != same(before):
        return False
    try:
        again, info = _read(path, limit)
    except OSError:
        return False
    return again == raw and same(info) == same(before)


def _sync_folder(folder: Path) -> None:
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _before_rename(tmp: str, path: Path) -> None:
    """A seam for the crash-safety tests (a failure injected between write and rename)."""


class _Signalled(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _HeldSignals:
    """While the temporary file exists: SIGTERM and SIGHUP raise :class:`_Signalled` and SIGINT
    raises KeyboardInterrupt, so the file is removed on the way out; after the first one (or
    :meth:`hold`) further signals are only recorded. On exit the previous handlers are put back
    and every signal held is delivered to them (a :class:`_Signalled` goes no further). Signals
    already ignored (``nohup``) are left alone, and so is everything outside the main thread
    (only it may set handlers)."""

    def __init__(self):
        self.previous: dict[int, object] = {}
        self.pending: list[int] = []
        self.delivered: list[int] = []
        self.holding = True  # until every handler is in place: a signal meanwhile waits for __exit__

    def __enter__(self) -> _HeldSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in _SIGNALS:
            current = signal.getsignal(signum)
            if current in (signal.SIG_IGN, None):
                continue
            self.previous[signum] = current
            signal.signal(signum, self._handle)
        self.holding = False
        return self

    def _handle(self, signum: int, frame) -> None:
        if self.holding:
            self.pending.append(signum)
            return
        self.holding = True
        if signum == getattr(signal, "SIGINT", None):
            raise KeyboardInterrupt
        raise _Signalled(signum)

    def hold(self) -> None:
        self.holding = True

    def __exit__(self, kind, exc, tb) -> bool:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        suppress = isinstance(exc, _Signalled)
        if suppress:
            self.pending.insert(0, exc.signum)  # the first signal first
        for signum in dict.fromkeys(self.pending):
            if signum not in self.previous:
                continue
            if signum == getattr(signal, "SIGINT", None) and isinstance(exc, KeyboardInterrupt):
                continue  # already on its way up
            self.delivered.append(signum)
            signal.raise_signal(signum)  # the default action ends the process here
        return suppress
