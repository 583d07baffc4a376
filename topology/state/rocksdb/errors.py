"""Errors raised by the durable state database (``topology.state.rocksdb``).

Every error names the state directory and the operation that failed; errors of RocksDB
(rocksdict) are re-raised as one of these, with the original as ``__cause__``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import StateCorruptedError, StreamsError

__all__ = (
    "StateCorruptedDirectoryError",
    "StateCorruptedStoreError",
    "StateDirectoryError",
    "StateFormatError",
    "StateLockedError",
    "StateStoreError",
)


class StateStoreError(StreamsError):
    """A state database operation failed: I/O during a commit or a read, use after close, ...

    ``path`` is the state directory, ``operation`` what was being done (``"open"``,
    ``"commit"``, ``"get"``, ...) and ``detail`` why it failed.

    >>> print(StateStoreError("/tmp/s", "commit", "no space left on device"))
    state directory /tmp/s: commit failed: no space left on device
    """

    def __init__(self, path: str | os.PathLike[str], operation: str, detail: str) -> None:
        super().__init__(str(path), operation, detail)
        self.path = Path(path)
        self.operation = operation
        self.detail = detail

    def __str__(self) -> str:
        return f"state directory {self.path}: {self.operation} failed: {self.detail}"


class StateDirectoryError(StateStoreError):
    """A directory that cannot be used as a state directory; it was left as it was.

    Raised by ``StateDB.open`` (and ``checkpoint``) for a path that is not a directory, a
    directory this process may not read or write, a directory that holds something other than
    a state directory (foreign files, a missing or corrupt format marker), or a database that
    RocksDB refuses to open.
    """


class StateFormatError(StateDirectoryError):
    """A state directory written in a format version this library does not read."""


class StateLockedError(StateDirectoryError):
    """A state directory in use by another live ``StateDB`` (this process or another one).

    ``holder_pid`` is the process id recorded by the holder, or ``None`` if it could not be
    read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        operation: str,
        detail: str,
        holder_pid: int | None = None,
    ) -> None:
        super().__init__(path, operation, detail)
        self.holder_pid = holder_pid

    def __reduce__(self) -> tuple[type[StateLockedError], tuple[str, str, str, int | None]]:
        return (type(self), (str(self.path), self.operation, self.detail, self.holder_pid))


class StateCorruptedStoreError(StateStoreError, StateCorruptedError):
    """Damage found while reading a state database.

    A checksum or I/O error (RocksDB's ``Corruption`` or ``IOError`` status), or a read that
    ended early on one: a :class:`~topology.errors.StateCorruptedError` naming the directory
    and the keyspace.
    """


class StateCorruptedDirectoryError(StateDirectoryError, StateCorruptedError):
    """Damage found opening a state directory.

    RocksDB reports corruption, or the last commit's record names keyspaces or steps the
    database no longer holds. The directory is left as it was (never recreated empty).
    """


_DAMAGE = ("corruption", "checksum", "io error", "ioerror", "no such file", "truncated",
           "bad magic", "not an sstable", "bad table")
"""Words of RocksDB's status texts that mean the files are damaged, not that we misused it."""


def is_damage(detail: str) -> bool:
    """Whether RocksDB's error text says its files are damaged."""
    text = detail.lower()
    return any(word in text for word in _DAMAGE)


def describe_os_error(exc: OSError) -> str:
    """An OSError's message without its file name (our errors name the directory already)."""
    return exc.strerror or str(exc)


def describe_rocksdb_error(exc: BaseException) -> str:
    """The message of an error raised by rocksdict (RocksDB's status text), never empty."""
    return str(exc) or type(exc).__name__
