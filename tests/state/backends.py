"""The registry of versioned store backends every state test runs against, and StateDB helpers.

A backend joins the data-driven conformance scenarios, the contract checker and the
property tests by adding one entry: a factory taking the store's keyword options
(``history_retention_ms``, and optionally ``segment_interval_ms`` and ``max_versions``) and
returning a new, empty store for ``str`` keys serialized as UTF-8 and ``str`` values.
"""

from __future__ import annotations

import atexit
import contextlib
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
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
    """StateDBs opened in temporary directories, each closed and removed by :meth:`close`.

    RocksDB locks its directory while open, so every database a test opens must be closed:
    open them through :meth:`keyspace` and call :meth:`close` when the test (or the
    hypothesis example) ends.
    """

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._databases: list[StateDB] = []

    def keyspace(self, name: str) -> Keyspace:
        """A keyspace of a fresh StateDB in a fresh temporary directory."""
        directory = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="stores-"))
        db = self._stack.enter_context(StateDB.open(Path(directory) / "state"))
        self._databases.append(db)
        return db.keyspace(name)

    def commit(self) -> None:
        """Commit every database opened so far (their stores' pending writes)."""
        for db in self._databases:
            db.commit()

    def close(self) -> None:
        """Close every database opened so far and remove its directory."""
        self._databases.clear()
        self._stack.close()


STATE_DIRS = StateDirs()
"""The databases behind the persistent entries of the store registries."""
