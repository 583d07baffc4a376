"""The state database of one task: every keyspace in one RocksDB, committed atomically.

One RocksDB database per state directory, one column family per keyspace plus ``meta``.
Column families share one write-ahead log, so the single write batch that ``commit`` writes
(every keyspace's pending writes and the meta entries) is applied whole or not at all, and a
restart after a crash at any instruction finds the state of some complete commit.
"""

from __future__ import annotations

import os
import re
import shutil
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from rocksdict import Checkpoint, Rdict, WriteBatch, WriteOptions

from . import layout
from .errors import (
    StateCorruptedDirectoryError,
    StateDirectoryError,
    StateStoreError,
    describe_os_error,
    describe_rocksdb_error,
    is_damage,
)
from .keyspace import Keyspace, _Cursor
from .lock import DirectoryLock
from .options import OptionsFactory, RocksDBOptions

__all__ = ("StateDB",)

META_FAMILY = "meta"
"""The column family of ``commit(meta=...)`` entries."""
COMMIT_RECORD = b"statedb.commit"
"""The meta entry every commit writes: its number, then the keyspaces the state holds."""
KEYSPACE_PREFIX = "ks:"
"""Keyspace ``name`` lives in column family ``"ks:" + name``: no name collides with ours."""
DEFAULT_FAMILY = "default"
"""RocksDB's own column family, always present, unused."""

_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


_DEFAULT_OPTIONS = RocksDBOptions()
"""RocksDB's defaults, in raw bytes mode."""


class StateDB:
    """The durable state of one task: named keyspaces and meta entries, committed atomically.

    Open one with :meth:`open`; use it as a context manager or call :meth:`close`. Pending
    writes of every keyspace live in memory until :meth:`commit` writes them, with the
    ``meta`` entries, in one atomic RocksDB write batch; :meth:`rollback` drops them. After a
    crash, reopening finds exactly the state of the last commit that returned (with
    ``sync=True`` even after a power loss; without it, after a process crash), or of the one
    in flight, whole. Not thread-safe: one task uses it at a time.

    Methods: :meth:`open`, :meth:`keyspace`, :meth:`commit`, :meth:`rollback`,
    :meth:`read_meta`, :meth:`checkpoint`, :meth:`close`.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with StateDB.open(tmp + "/state") as db:
    ...         db.keyspace("totals").put(b"k", b"1")
    ...         db.commit({b"offset": b"42"})
    ...     with StateDB.open(tmp + "/state") as db:
    ...         db.keyspace("totals").get(b"k"), db.read_meta(b"offset")
    (b'1', b'42')
    """

    def __init__(
        self,
        path: Path,
        database: Rdict,
        families: set[str],
        lock: DirectoryLock,
        *,
        sync: bool,
        options: OptionsFactory,
    ) -> None:
        """Wrap an opened database and its held lock; :meth:`open` is the way to get one."""
        self._path = path
        self._options = options
        self._db: Rdict | None = database
        self._families = families
        self._lock = lock
        self._sync = sync
        self._write_options = WriteOptions()
        self._write_options.sync = sync
        self._keyspaces: dict[str, Keyspace] = {}
        self._cursors: weakref.WeakSet[_Cursor] = weakref.WeakSet()
        self._meta = Keyspace(
            META_FAMILY,
            database.get_column_family(META_FAMILY),
            database.get_column_family_handle(META_FAMILY),
            self._cursors,
            path,
        )
        self._unusable: str | None = None
        self._failed = False
        self._commits = _check_commit_record(path, self._meta.get(COMMIT_RECORD), families)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, sync: bool = False,
             options: RocksDBOptions | None = None) -> StateDB:
        """Open the state directory ``path``, creating it (mode 0o700) if missing or empty.

        ``sync=True`` fsyncs every commit, so it survives a power loss; with ``False`` a commit
        survives a crash of the process (it is in the write-ahead log) but not of the machine.
        ``options`` tune RocksDB for this opening (memtables, block cache; ``None``: RocksDB's
        defaults); they are not stored in the directory.
        The directory is refused, untouched, if it holds anything but a state directory (or
        the leftovers of a creation a crash interrupted, which are completed or removed).

        Runtime complexity: O(number of keyspaces) plus RocksDB's recovery of its log.

        :raises StateLockedError: another live ``StateDB`` (this process or another) has it open.
        :raises StateFormatError: it was written in a newer format version.
        :raises StateDirectoryError: it is not a directory, cannot be read or written, holds
            foreign entries or a corrupt marker, or RocksDB cannot open its database.
        """
        directory = Path(os.path.abspath(path))
        factory = (options or _DEFAULT_OPTIONS).factory()
        layout.ensure_directory(directory, "open")
        layout.inspect(directory, "open")  # refuse a foreign directory before writing to it
        lock = DirectoryLock.acquire(directory, layout.LOCK, "open")
        try:
            found = layout.inspect(directory, "open")  # again, now that no one else can change it
            if found is layout.Layout.READY:
                families = _read_families(directory)  # refuse a foreign database untouched
                lock.record_holder("open")
            else:
                lock.record_holder("open")
                if found is layout.Layout.FRESH:
                    layout.create(directory, _new_database(directory, "open", factory), "open")
                else:
                    layout.finish(directory, "open")
                families = _read_families(directory)
            return cls(directory, _open_database(directory, families, factory), families, lock,
                       sync=sync, options=factory)
        except BaseException:
            lock.release()
            raise

    # -- properties ------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The state directory (absolute)."""
        return self._path

    @property
    def sync(self) -> bool:
        """Whether commits are fsynced."""
        return self._sync

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._db is None

    def __repr__(self) -> str:
        state = " closed" if self._db is None else " failed" if self._failed else ""
        return f"<StateDB {str(self._path)!r} sync={self._sync}{state}>"

    # -- keyspaces -------------------------------------------------------------------------

    def keyspace(self, name: str) -> Keyspace:
        """The keyspace ``name``, created (durably, at once, outside any commit) on first use.

        Names are 1 to 249 characters from ``[A-Za-z0-9._-]`` (Kafka's store-name rules).
        Repeated calls return the same object.

        Runtime complexity: O(1); the first call for a new name creates a column family.

        :raises ValueError: ``name`` is not a valid keyspace name.
        :raises StateStoreError: the database is closed or failed, or RocksDB fails to create
            the column family.
        """
        database = self._usable("keyspace")
        existing = self._keyspaces.get(name) if isinstance(name, str) else None
        if existing is not None:
            return existing
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise ValueError(
                f"keyspace names are 1 to 249 characters from [A-Za-z0-9._-], got {name!r}"
            )
        family = KEYSPACE_PREFIX + name
        try:
            if family in self._families:
                column = database.get_column_family(family)
            else:
                column = database.create_column_family(family, self._options(True))
                self._families.add(family)
            handle = database.get_column_family_handle(family)
        except Exception as exc:
            raise StateStoreError(
                self._path, f"create keyspace {name!r}", describe_rocksdb_error(exc)
            ) from exc
        keyspace = Keyspace(name, column, handle, self._cursors, self._path)
        self._keyspaces[name] = keyspace
        return keyspace

    # -- committing ------------------------------------------------------------------------

    def commit(self, meta: Mapping[bytes, bytes | None] | None = None) -> None:
        """Write every keyspace's pending writes and ``meta`` atomically, then clear them.

        ``meta`` maps keys to values, ``None`` deleting the key: input offsets, a batch id,
        read positions, whatever must change together with the state. Nothing to write is a
        no-op. If the write fails, the database becomes unusable (every call but
        :meth:`close` raises): RocksDB refuses further writes after a failed one, and the
        directory holds either the previous commit or this one, whole; reopen it and read the
        meta to see which.

        Runtime complexity: O(w + m) for w pending writes and m meta entries, plus the write
        (and the fsync with ``sync=True``).

        :raises TypeError: a meta key is not bytes or a value is neither bytes nor ``None``
            (nothing is written; the pending writes stay).
        :raises StateStoreError: the write failed (full disk, I/O error), RocksDB could not
            open the iterator that keeps a live backward read's view (nothing is written; the
            pending writes stay), or the database was already closed or failed.
        """
        database = self._usable("commit")
        entries = list(meta.items()) if meta else []
        for key, value in entries:
            if not isinstance(key, bytes) or not (value is None or isinstance(value, bytes)):
                raise TypeError(
                    "commit meta maps bytes to bytes or None, got "
                    f"{type(key).__name__} -> {type(value).__name__}"
                )
        dirty = [keyspace for keyspace in self._keyspaces.values() if keyspace._dirty]
        if not (dirty or entries):
            return
        for keyspace in dirty:
            keyspace._encode_held()
        try:
            self._keep_views()
        except Exception as exc:
            raise StateStoreError(
                self._path, "commit",
                f"cannot keep the view of a live backward read: {describe_rocksdb_error(exc)}",
            ) from exc
        meta_keyspace = self._meta
        for key, value in entries:
            if value is None:
                meta_keyspace.delete(key)
            else:
                meta_keyspace.put(key, value)
        number = self._commits + 1
        names = sorted(f[len(KEYSPACE_PREFIX):] for f in self._families
                       if f.startswith(KEYSPACE_PREFIX))
        meta_keyspace.put(COMMIT_RECORD, "\n".join([str(number), *names]).encode("ascii"))
        dirty.append(meta_keyspace)
        batch = WriteBatch(raw_mode=True)
        for keyspace in dirty:
            keyspace._write_pending(batch)
        try:
            database.write(batch, self._write_options)
        except Exception as exc:
            detail = describe_rocksdb_error(exc)
            self._fail(f"a commit failed ({detail}): close this StateDB and open the directory "
                       "again")
            raise StateStoreError(
                self._path, "commit",
                f"{detail}; the directory holds the previous commit or this one, whole: reopen "
                "it and read the meta to see which",
            ) from exc
        for keyspace in dirty:
            keyspace._clear_pending()
        self._commits = number
        _write_committed(self._path, number)

    def rollback(self) -> None:
        """Drop every keyspace's pending writes; reads then see the last commit.

        Runtime complexity: O(k) for k keyspaces.

        :raises StateStoreError: the database is closed or failed.
        """
        self._usable("rollback")
        for keyspace in self._keyspaces.values():
            keyspace._clear_pending()

    def read_meta(self, key: bytes) -> bytes | None:
        """The committed meta value of ``key``, or ``None``.

        Runtime complexity: one RocksDB lookup.

        :raises TypeError: ``key`` is not bytes.
        :raises StateStoreError: RocksDB fails to read, or the database is closed or failed.
        """
        self._usable("read_meta")
        return self._meta.get(key)

    def checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Write a consistent copy of the committed state to a new state directory ``path``.

        Pending writes are not part of it. The copy opens with :meth:`open` like any state
        directory; RocksDB hard-links its immutable files where it can, so it is cheap on the
        same file system.

        Runtime complexity: a flush of RocksDB's memory table plus O(number of files).

        :raises StateDirectoryError: ``path`` exists, or the copy cannot be written (what was
            written of it is removed).
        :raises StateStoreError: the database is closed or failed.
        """
        database = self._usable("checkpoint")
        target = Path(os.path.abspath(path))
        try:
            os.makedirs(target.parent, exist_ok=True)
            os.mkdir(target, 0o700)  # fails if it exists: the directory is this call's own
        except FileExistsError:
            raise StateDirectoryError(target, "checkpoint", "the target already exists") from None
        except OSError as exc:
            raise StateDirectoryError(
                target, "checkpoint", f"cannot create the directory: {describe_os_error(exc)}"
            ) from exc
        lock = DirectoryLock.acquire(target, layout.LOCK, "checkpoint")

        def copy(destination: Path) -> None:
            try:
                Checkpoint(database).create_checkpoint(str(destination))
            except Exception as exc:
                raise StateDirectoryError(
                    target, "checkpoint", describe_rocksdb_error(exc)
                ) from exc

        try:
            lock.record_holder("checkpoint")
            layout.create(target, copy, "checkpoint")
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)  # never leave a half copy that would open
            raise
        finally:
            lock.release()

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Drop pending writes, close RocksDB and release the directory; idempotent.

        Every keyspace, and every iterator still open, raises :class:`StateStoreError` if
        used afterwards. The directory can be opened again at once, in this process too.

        Runtime complexity: O(k + i) for k keyspaces and i live iterators, plus RocksDB's close.

        :raises StateStoreError: RocksDB reported an error while closing (everything is
            released anyway; committed data is in the write-ahead log).
        """
        database = self._db
        if database is None:
            return
        self._detach("the StateDB is closed")
        self._db = None
        error: Exception | None = None
        try:
            database.close()
        except Exception as exc:
            error = exc
        del database
        self._lock.release()
        if error is not None and not self._failed:
            raise StateStoreError(
                self._path, "close", describe_rocksdb_error(error)
            ) from error

    def __enter__(self) -> StateDB:
        """Return this database; it is closed when the block exits."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close (pending writes are dropped, not committed)."""
        self.close()

    # -- helpers ---------------------------------------------------------------------------

    def _usable(self, operation: str) -> Rdict:
        """The open RocksDB database, or raise why this one cannot be used."""
        if self._unusable is not None or self._db is None:
            raise StateStoreError(self._path, operation, self._unusable or "the StateDB is closed")
        return self._db

    def _keep_views(self) -> None:
        """Before a commit: let every live backward read keep reading the data of its call.

        See ``keyspace._Pin``: each pin opens one RocksDB iterator on the data as it is
        before the write, once; a read that needs no further iterator has cleared its pin.
        """
        for cursor in list(self._cursors):
            pin = cursor.pin
            if pin is not None:
                cursor.pin = None
                pin()

    def _fail(self, reason: str) -> None:
        """Make every later call but :meth:`close` raise ``reason`` (after a failed write)."""
        self._failed = True
        self._detach(reason)

    def _detach(self, reason: str) -> None:
        """Release every RocksDB object held outside ``self._db`` and refuse further use."""
        self._unusable = reason
        for keyspace in self._keyspaces.values():
            keyspace._detach(reason)
        path = self._path

        def unusable() -> None:
            raise StateStoreError(path, "items", reason)

        for cursor in list(self._cursors):
            cursor.next = unusable
            cursor.pin = None
        self._cursors.clear()
        self._meta._detach(reason)


def _new_database(directory: Path, operation: str,
                  options: OptionsFactory) -> Callable[[Path], None]:
    """A ``populate`` step for :func:`layout.create`: an empty database with its meta family."""

    def populate(target: Path) -> None:
        os.mkdir(target, 0o700)
        try:
            database = Rdict(str(target), options(True))
            try:
                database.create_column_family(META_FAMILY, options(True))
            finally:
                database.close()
        except Exception as exc:
            raise StateDirectoryError(
                directory, operation, f"cannot create the database: {describe_rocksdb_error(exc)}"
            ) from exc

    return populate


def _check_commit_record(directory: Path, record: bytes | None, families: set[str]) -> int:
    """The number of the database's last commit, checked against what it says it covers.

    Every commit records its number and the keyspaces the state holds, in the same atomic
    write; after it, the number goes to ``STATEDB.commit`` too. A database whose last commit
    is behind that file lost committed steps (a damaged or deleted write-ahead log rolled it
    back), and one that lacks a keyspace its last commit names lost it (a damaged manifest):
    either is refused, never recreated empty. A state written before commits were recorded
    (no record, no file) is taken as it is.

    :raises StateCorruptedDirectoryError: naming what is missing.
    """
    number, names = 0, []
    if record is not None:
        try:
            first, *names = record.decode("ascii").split("\n")
            number = int(first)
        except (UnicodeDecodeError, ValueError):
            raise StateCorruptedDirectoryError(
                directory, "open", f"its commit record is damaged ({record[:40]!r})") from None
    missing = sorted(name for name in names if KEYSPACE_PREFIX + name not in families)
    if missing:
        raise StateCorruptedDirectoryError(
            directory, "open",
            f"commit {number} holds keyspaces {missing}, which the database no longer has: "
            "its manifest was damaged; restore the directory from a copy")
    written = _read_committed(directory)
    if written is not None and written > number:
        raise StateCorruptedDirectoryError(
            directory, "open",
            f"commit {written} was made, but the database holds commit {number}: its "
            "write-ahead log lost committed steps; restore the directory from a copy")
    return number


def _read_committed(directory: Path) -> int | None:
    """The number in ``STATEDB.commit``; ``None`` if absent or unreadable (a torn write)."""
    try:
        return int((directory / layout.COMMITTED).read_bytes().decode("ascii"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _write_committed(directory: Path, number: int) -> None:
    """Record that commit ``number`` returned (best effort: a torn write reads as absent)."""
    try:
        fd = os.open(directory / layout.COMMITTED, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                     0o600)
        try:
            os.write(fd, str(number).encode("ascii"))
        finally:
            os.close(fd)
    except OSError:
        pass  # the check it serves is lost for this commit, the commit itself is not


def _read_families(directory: Path) -> set[str]:
    """The column families of a state directory's database, read without opening it.

    :raises StateDirectoryError: RocksDB cannot read the database's manifest, or the families
        are not those of a state database.
    """
    try:
        families = set(Rdict.list_cf(str(directory / layout.DB_DIR),
                                     _DEFAULT_OPTIONS.factory()(False)))
    except Exception as exc:
        detail = describe_rocksdb_error(exc)
        error = StateCorruptedDirectoryError if is_damage(detail) else StateDirectoryError
        raise error(directory, "open", f"its database cannot be read: {detail}") from exc
    unexpected = sorted(
        family for family in families
        if family not in (DEFAULT_FAMILY, META_FAMILY)
        and not (family.startswith(KEYSPACE_PREFIX)
                 and _NAME.fullmatch(family[len(KEYSPACE_PREFIX):]))
    )
    if META_FAMILY not in families or unexpected:
        found = f"unexpected column families {unexpected}" if unexpected else "no meta family"
        raise StateDirectoryError(
            directory, "open", f"its database is not a state database ({found})"
        )
    return families


def _open_database(directory: Path, families: set[str], options: OptionsFactory) -> Rdict:
    """Open the database of a complete state directory with all its column ``families``."""
    try:
        return Rdict(
            str(directory / layout.DB_DIR),
            options(False),
            column_families={
                family: options(False) for family in families if family != DEFAULT_FAMILY
            },
        )
    except Exception as exc:
        detail = describe_rocksdb_error(exc)
        error = StateCorruptedDirectoryError if is_damage(detail) else StateDirectoryError
        raise error(directory, "open", f"RocksDB cannot open its database: {detail}") from exc
