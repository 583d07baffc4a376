"""The registry of versioned store backends every state test runs against, and StateDB helpers.

A backend joins the data-driven conformance scenarios, the contract checker and the
property tests by adding one entry: a factory taking the store's keyword options
(``history_retention_ms``, and optionally ``segment_interval_ms`` and ``max_versions``) and
returning a new, empty store for ``str`` keys serialized as UTF-8 and ``str`` values.
"""

from __future__ import annotations

import atexit
import tempfile
import weakref
from collections.abc import Callable
from typing import Any

from topology.state.api import VersionedKeyValueStore
from topology.state.memory import InMemoryVersionedKeyValueStore
from topology.state.rocksdb import Keyspace, RocksDBVersionedKeyValueStore, StateDB


def _memory(**options: Any) -> VersionedKeyValueStore:
    return InMemoryVersionedKeyValueStore("test", str.encode, **options)


_FREE: list[StateDB] = []
"""Open StateDBs with an empty keyspace ``"test"``, ready for the next store."""
_DIRECTORY = tempfile.TemporaryDirectory(prefix="versioned-")


def _rocksdb(**options: Any) -> VersionedKeyValueStore:
    """A store on an empty keyspace of a StateDB of its own.

    Opening a StateDB costs tens of milliseconds (most of it creating the keyspace), too
    much for thousands of hypothesis examples, so databases are reused: closing a store (or
    garbage-collecting one a test left open) rolls back its writes, which were never
    committed, and frees its database. All of them are closed and removed at exit.
    """
    db = _FREE.pop() if _FREE else StateDB.open(tempfile.mkdtemp(dir=_DIRECTORY.name))
    keyspace = db.keyspace("test")
    released = False

    def release() -> None:  # called by close(), then again when the store is collected
        nonlocal released
        if released:
            return
        released = True
        db.rollback()
        if next(keyspace.items(), None) is None:
            _FREE.append(db)
        else:  # something committed to it: do not reuse it
            db.close()

    try:
        store = RocksDBVersionedKeyValueStore("test", str.encode, keyspace, on_close=release,
                                              **options)
    except BaseException:
        release()
        raise
    weakref.finalize(store, release)
    return store


@atexit.register
def _close_databases() -> None:
    while _FREE:
        _FREE.pop().close()
    _DIRECTORY.cleanup()


VERSIONED_BACKENDS: dict[str, Callable[..., VersionedKeyValueStore]] = {
    "memory": _memory,
    "rocksdb": _rocksdb,
}


def check_internals(store: Any) -> None:
    """Run the backend's own invariant check (``_check()``) if it has one."""
    check = getattr(store, "_check", None)
    if check is not None:
        check()


class StateDirs:
    """Empty keyspaces of open StateDBs, for the persistent entries of the store registries.

    Opening a StateDB costs about 13 ms, more than most hypothesis examples, so databases are
    reused: :meth:`close` (at the end of each test or example) drops the pending writes of
    every database handed out since the last one, deletes what was committed to its keyspace
    and commits that, and keeps the database for the next :meth:`keyspace`. A database that
    cannot be emptied is closed instead. All of them are closed and removed at exit.
    """

    def __init__(self) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix="stores-")
        self._free: list[StateDB] = []
        self._handed: list[tuple[StateDB, Keyspace]] = []
        atexit.register(self._close_all)

    def keyspace(self, name: str) -> Keyspace:
        """An empty keyspace ``name`` of a StateDB no other keyspace handed out uses."""
        db = self._free.pop() if self._free else StateDB.open(
            tempfile.mkdtemp(dir=self._directory.name))
        keyspace = db.keyspace(name)
        self._handed.append((db, keyspace))
        assert next(keyspace.items(), None) is None, "a reused keyspace was not emptied"
        return keyspace

    def commit(self) -> None:
        """Commit every database handed out since the last :meth:`close`."""
        for db, _ in self._handed:
            db.commit()

    def close(self) -> None:
        """Empty every keyspace handed out since the last call and keep its database."""
        handed, self._handed = self._handed, []
        for db, keyspace in handed:
            try:
                db.rollback()
                for key in [key for key, _ in keyspace.items()]:
                    keyspace.delete(key)
                db.commit()
                emptied = next(keyspace.items(), None) is None
            except Exception:
                emptied = False
            if emptied:
                self._free.append(db)
            else:
                db.close()

    def _close_all(self) -> None:
        self.close()
        while self._free:
            self._free.pop().close()
        self._directory.cleanup()


STATE_DIRS = StateDirs()
"""The databases behind the persistent entries of the store registries."""
