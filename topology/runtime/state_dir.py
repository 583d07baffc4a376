"""A task's state directory: where a state database of the task lives, opened on first use.

A :class:`~topology.state.rocksdb.StateDB` of task ``0_0`` is ``<state_dir>/<application_id>/
<name>`` (Kafka's layout, ``name`` being the task id or derived from it) when the runtime is
given a ``state_dir``, otherwise a private temporary directory. Nothing is opened, and
rocksdict is not imported, until the first keyspace is asked for: a topology that never
writes to disk never touches one.

Owner-only: the directories the library creates or reuses are 0o700 and its files 0o600.
Missing directories (``state_dir`` and its missing parents included) are created 0o700; an
existing ``<state_dir>/<application_id>``, task directory or state directory (and its
``db/``) that lets group or others in loses those bits if this process owns it, and is
refused (:class:`~topology.state.rocksdb.StateDirectoryError`, naming it) if it does not. An
existing ``state_dir`` keeps its mode: it is the user's. A symbolic link at
``<state_dir>/<application_id>`` or at a task directory (``0_0``, ``0_0.spill``) is refused,
naming where it points, never followed; ``state_dir`` itself may be a link (the user's
choice), and so may its parents.

Without a ``state_dir`` the database lives in a private ``tempfile.mkdtemp`` directory
(0o700, named ``topology-state-*`` under the system's temporary directory, ``TMPDIR``).
:meth:`TaskStateDir.close` removes it; so does a ``weakref.finalize`` owned by the
:class:`TaskStateDir` when it is garbage-collected unclosed or at interpreter exit (the
database is closed first). A process killed by SIGKILL (or ``os._exit``) runs nothing: its
``topology-state-*`` directories stay behind, and are safe to delete once it is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace, RocksDBOptions, StateDB

__all__ = ("TaskStateDir", "TaskStateView", "spill_options")

_COMPONENT = re.compile(r"[A-Za-z0-9._-]+")


class TaskStateDir:
    """The state directory of one task, and its state database, opened lazily.

    :param state_dir: the parent directory of every application's state (created 0o700 if
        missing, otherwise left as it is), or ``None`` for a private temporary directory
        removed by :meth:`close`, or when this object is garbage-collected or the interpreter
        exits (see the module docstring).
    :param application_id: the application's directory under ``state_dir``.
    :param name: the database's directory under that, e.g. the task id ``0_0``.
    :param options: gives the RocksDB options to open the database with (called when it is
        opened); ``None``: RocksDB's defaults.
    :raises ValueError: with a ``state_dir``, for an ``application_id`` that is not one path
        component of ``[A-Za-z0-9._-]`` (other than ``.`` and ``..``).
    """

    def __init__(self, state_dir: str | os.PathLike[str] | None, application_id: str,
                 name: str = "0_0",
                 options: Callable[[], RocksDBOptions] | None = None) -> None:
        if state_dir is not None and (_COMPONENT.fullmatch(application_id) is None
                                      or application_id in (".", "..")):
            raise ValueError(f"with a state_dir, the application id names a directory: it must "
                             f"be made of [A-Za-z0-9._-], got {application_id!r}")
        self._parent = None if state_dir is None else Path(os.path.abspath(state_dir))
        self._application_id = application_id
        self._name = name
        self._options = options
        self._temporary: weakref.finalize[[], TaskStateDir] | None = None
        """Removes the private temporary directory (called by :meth:`close`, or at gc)."""
        self._db: StateDB | None = None

    @property
    def path(self) -> Path | None:
        """The state database's directory, once opened (``None`` before)."""
        return None if self._db is None else self._db.path

    def keyspace(self, name: str) -> Keyspace:
        """The keyspace ``name`` of the task's state database, which is opened on first use.

        :raises StateDirectoryError: the directory cannot be created, holds something
            that is not a state directory (it is never half-read), is a symbolic link, or
            lets group or others in and belongs to another user.
        :raises StateLockedError: another live database has the directory open.
        """
        return self._database().keyspace(name)

    def _open(self) -> StateDB:
        from ..state.rocksdb import StateDB

        options = None if self._options is None else self._options()
        if self._parent is None:
            temporary = _Temporary(Path(tempfile.mkdtemp(prefix="topology-state-")))  # 0o700
            try:
                db = temporary.db = StateDB.open(temporary.path / self._name, options=options)
            except BaseException:
                temporary.remove()
                raise
            # close() calls it; unclosed, it runs when self is collected or the interpreter exits
            self._temporary = weakref.finalize(self, temporary.remove)
            return db
        application = self._parent / self._application_id
        _make_private_dirs(application)
        _private_directory(application)
        task = application / self._name
        if os.path.islink(task):
            from ..state.rocksdb.layout import symlink_error

            raise symlink_error(task, "open")
        return StateDB.open(task, options=options)

    @property
    def durable(self) -> bool:
        """Whether the state outlives the task (a ``state_dir`` was given)."""
        return self._parent is not None

    def commit(self, meta: Mapping[bytes, bytes | None] | None = None) -> None:
        """Commit the pending writes and ``meta`` in one atomic step.

        Without ``meta``, nothing is done if the database was never opened; with it, the
        database is opened first.

        :raises StateStoreError: the write failed (see ``StateDB.commit``).
        """
        if meta:
            self._database().commit(meta)
        elif self._db is not None:
            self._db.commit()

    def checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Write a consistent copy of the committed state to the new directory ``path``.

        :raises StateDirectoryError: see ``StateDB.checkpoint``.
        """
        self._database().checkpoint(path)

    def read_meta(self, key: bytes) -> bytes | None:
        """The committed meta entry ``key`` (opens the database), ``None`` if absent.

        :raises StateDirectoryError: the state directory cannot be used.
        :raises StateLockedError: another live database has the directory open.
        """
        return self._database().read_meta(key)

    def _database(self) -> StateDB:
        db = self._db
        if db is None:
            db = self._db = self._open()
        return db

    def close(self) -> None:
        """Close the state database (pending writes are dropped); idempotent.

        A temporary directory is removed; one under ``state_dir`` is kept.
        """
        db, self._db = self._db, None
        temporary, self._temporary = self._temporary, None
        try:
            if db is not None:
                db.close()
        finally:
            if temporary is not None:
                temporary()  # runs the finalizer once: removes the directory


class _Temporary:
    """A private temporary directory and the database in it, removed once.

    Held by the finalizer of its :class:`TaskStateDir` and never refers back to it, so the
    finalizer does not keep the :class:`TaskStateDir` alive.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: StateDB | None = None
        self._pid = os.getpid()

    def remove(self) -> None:
        """Close the database if it is still open, then remove the directory; idempotent.

        Does nothing in a child made by ``fork()``: the directory is its parent's.
        """
        if os.getpid() != self._pid:
            return
        db, self.db = self.db, None
        try:
            if db is not None:
                db.close()
        except Exception:  # noqa: BLE001, S110 - removing the directory is what is left to do
            pass
        finally:
            shutil.rmtree(self.path, ignore_errors=True)


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing ancestors, each owner-only (0o700).

    Existing directories are left as they are; on an error it stops, and
    :func:`_private_directory` then reports what is wrong with the path.
    """
    missing = []
    while not os.path.lexists(path) and path.parent != path:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return


def _private_directory(path: Path) -> None:
    """Check that ``path`` is a directory, not a link, and make it owner-only (0o700).

    :raises StateDirectoryError: it is missing or unreachable, not a directory, a symbolic
        link (naming where it points), or looser than owner-only and owned by another user.
    """
    from ..state.rocksdb.layout import restrict_directory

    restrict_directory(path, "open", follow_symlinks=False)


def spill_options() -> RocksDBOptions:
    """RocksDB options of the database that holds spilled suppression buffers.

    A spilling buffer exists to bound memory, so RocksDB gets little of it: 512 KiB memtables
    (two per column family), a 256 KiB block cache, 64 KiB file buffers, and Bloom filters so
    that looking up a key that is not spilled (every new key) rarely reads a file. With
    memtables that small and random keys, level compaction rewrites the database over and
    over; universal compaction rewrites far less.

    Measured with ``benchmarks/spill.py`` (1 M updates, 100 k keys, 10 k records in memory,
    on a shared 2-core VM): RocksDB's defaults (64 MiB memtables, a 32 MiB cache) took 2.3x
    the peak RSS of the unspilled reference, these about 1.2x (1.6x with 1 M keys: see
    docs/performance.md); universal compaction cut the CPU time of a random read and write
    over 500 k keys from about 28 to 21 us.
    """
    from ..state.rocksdb import RocksDBOptions

    return RocksDBOptions(write_buffer_bytes=512 << 10, max_write_buffers=2,
                          block_cache_bytes=256 << 10, bloom_bits_per_key=10,
                          universal_compaction=True, writable_file_buffer_bytes=64 << 10)


class TaskStateView:
    """One task's part of a database that several tasks share (the Spark runner's tasks).

    Keyspaces and meta entries get the task's prefix (``0_3.``); :meth:`commit` stages the
    task's meta entries instead of writing them, and the owner of the shared database
    commits every task's pending writes and staged entries in one atomic step
    (:meth:`TaskStateDir.commit`). Closing a view closes nothing: the owner closes the
    database.

    :param shared: the shared database.
    :param prefix: the task's prefix of keyspace names and meta keys.
    :param staged: where the view stages meta entries for the owner's next commit.
    """

    def __init__(self, shared: TaskStateDir, prefix: str,
                 staged: dict[bytes, bytes | None]) -> None:
        self._shared = shared
        self._prefix = prefix
        self._meta_prefix = prefix.encode("ascii")
        self._staged = staged

    @property
    def path(self) -> Path | None:
        """The shared database's directory, once opened (``None`` before)."""
        return self._shared.path

    @property
    def durable(self) -> bool:
        """Whether the shared state outlives the tasks."""
        return self._shared.durable

    def keyspace(self, name: str) -> Keyspace:
        """The task's keyspace ``name`` (``<prefix><name>`` in the shared database)."""
        return self._shared.keyspace(self._prefix + name)

    def commit(self, meta: Mapping[bytes, bytes | None] | None = None) -> None:
        """Stage ``meta`` for the owner's next commit (the pending writes wait for it too)."""
        for key, value in (meta or {}).items():
            self._staged[self._meta_prefix + key] = value

    def read_meta(self, key: bytes) -> bytes | None:
        """The task's committed meta entry ``key``, ``None`` if absent."""
        return self._shared.read_meta(self._meta_prefix + key)

    def close(self) -> None:
        """Nothing to close: the owner closes the shared database."""
