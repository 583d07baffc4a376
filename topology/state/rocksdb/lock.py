"""The advisory lock that keeps a state directory to one live ``StateDB`` at a time.

RocksDB locks its own database directory too, but its error does not say who holds it, and it
is taken only once the database opens; this lock is taken first, on a file beside the database,
and names the holder's process id. It is a ``flock`` on an open file description, so it
conflicts between two ``StateDB`` objects of one process as well as between processes, and the
kernel releases it when the holder dies (SIGKILL included): a stale lock file never blocks a
restart. A child made by ``fork()`` without ``exec`` inherits the lock while it keeps the
descriptor open; the descriptor is close-on-exec.

POSIX only (``fcntl``): it is imported when a lock is taken, so ``import topology`` does not
need it and only a durable state directory needs Linux or macOS.

The lock file is created 0o600. :meth:`DirectoryLock.record_holder`, the first change to a
locked state directory, also makes the directory owner-only (``layout.make_private``): only
a directory that was accepted as a state directory is ever changed.
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

from .errors import StateDirectoryError, StateLockedError, describe_os_error
from .layout import make_private, restrict_descriptor

__all__ = ("DirectoryLock",)

_MAX_PID_BYTES = 32


class DirectoryLock:
    """An exclusive lock on one state directory, held until :meth:`release`.

    Runtime complexity: O(1) system calls to acquire and to release.
    """

    def __init__(self, directory: Path, fd: int, name: str) -> None:
        """Wrap an already locked descriptor; use :meth:`acquire` to take a lock.

        The descriptor is owned by a file object, so a lock that is never released is still
        released when this object is garbage-collected.
        """
        self.directory = directory
        self._name = name
        self._file: io.FileIO | None = io.FileIO(fd, "r+")

    @classmethod
    def acquire(cls, directory: Path, lock_name: str, operation: str) -> DirectoryLock:
        """Lock ``directory`` through its file ``lock_name`` (created 0o600 if missing).

        An existing lock file is not written: call :meth:`record_holder` before changing
        anything else in the directory, so that a refused competitor can name this process.

        :raises StateLockedError: another live ``StateDB`` holds the lock (its pid is named).
        :raises StateDirectoryError: the lock file cannot be created or opened (permissions,
            a symbolic link in its place, a read-only file system ...).
        :raises ImportError: not a POSIX system (no ``fcntl``, e.g. Windows).
        """
        try:
            import fcntl
        except ImportError as exc:
            raise ImportError(
                "a durable state directory needs a POSIX system (Linux, macOS): its lock uses "
                "fcntl.flock, which this platform lacks"
            ) from exc
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(directory / lock_name, flags, 0o600)
        except OSError as exc:
            detail = f"cannot open the lock file {lock_name}: {describe_os_error(exc)}"
            raise StateDirectoryError(directory, operation, detail) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                detail = f"cannot lock {lock_name}: {describe_os_error(exc)}"
                raise StateDirectoryError(directory, operation, detail) from exc
            who = "an unknown process" if holder is None else f"pid {holder}"
            if holder == os.getpid():
                who += ", this process: close the other StateDB first"
            raise StateLockedError(
                directory, operation, f"the directory is in use by another runtime ({who})", holder
            ) from None
        return cls(directory, fd, lock_name)

    def record_holder(self, operation: str) -> None:
        """Make the directory owner-only, then write this process's id into the lock file.

        The directory, ``db/``, the marker and the commit file lose their group and other
        permission bits (``layout.make_private``), and so does the lock file; the id is for
        competitors' error messages.

        :raises StateDirectoryError: the lock file cannot be written (e.g. a full disk), or an
            entry is looser than owner-only and belongs to another user.
        """
        assert self._file is not None, "the lock was released"
        make_private(self.directory, operation)
        restrict_descriptor(self._file.fileno(), self.directory / self._name, operation)
        try:
            self._file.truncate(0)
            os.pwrite(self._file.fileno(), f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            detail = f"cannot write the lock file {self._name}: {describe_os_error(exc)}"
            raise StateDirectoryError(self.directory, operation, detail) from exc

    def release(self) -> None:
        """Release the lock; calling it again does nothing.

        The lock file stays (removing it would race with a process about to lock it).
        """
        file, self._file = self._file, None
        if file is not None:
            file.close()  # closing the only descriptor of the open file drops the flock


def _read_pid(fd: int) -> int | None:
    """The process id written in the lock file, or ``None`` if unreadable."""
    try:
        return int(os.pread(fd, _MAX_PID_BYTES, 0).decode("ascii").strip())
    except (OSError, ValueError):
        return None

