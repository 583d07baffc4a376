"""The registry of versioned store backends every state test runs against, and StateDB helpers.

A backend joins the data-driven conformance scenarios, the contract checker and the
property tests by adding one entry: a factory taking the store's keyword options
(``history_retention_ms``, and optionally ``segment_interval_ms`` and ``max_versions``) and
returning a new, empty store for ``str`` keys serialized as UTF-8 and ``str`` values.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any

from topology.state.api import VersionedKeyValueStore
from topology.state.memory import InMemoryVersionedKeyValueStore
from topology.state.rocksdb import Keyspace, RocksDBVersionedKeyValueStore, StateDB

from .pool import Databases


def _memory(**options: Any) -> VersionedKeyValueStore:
    return InMemoryVersionedKeyValueStore("test", str.encode, **options)


_DATABASES = Databases("stores-")
"""The databases behind every persistent store of the registries."""


def _rocksdb(**options: Any) -> VersionedKeyValueStore:
    """A store on an empty keyspace of a StateDB of its own, lent by :data:`_DATABASES`:
    closing the store (or garbage-collecting one a test left open) gives it back."""
    db = _DATABASES.lend()
    keyspace = db.keyspace("test")
    released = False

    def release() -> None:  # called by close(), then again when the store is collected
        nonlocal released
        if not released:
            released = True
            _DATABASES.take_back(db, [keyspace])

    try:
        assert next(keyspace.items(), None) is None, "a lent keyspace was not emptied"
        store = RocksDBVersionedKeyValueStore("test", str.encode, keyspace, on_close=release,
                                              **options)
    except BaseException:
        release()
        raise
    weakref.finalize(store, release)
    return store


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
    """Empty keyspaces of StateDBs lent by :data:`_DATABASES`, given back by :meth:`close`
    (at the end of each test or hypothesis example)."""

    def __init__(self) -> None:
        self._lent: list[tuple[StateDB, Keyspace]] = []

    def keyspace(self, name: str) -> Keyspace:
        """An empty keyspace ``name`` of a StateDB no other keyspace lent out uses."""
        db = _DATABASES.lend()
        keyspace = db.keyspace(name)
        self._lent.append((db, keyspace))
        assert next(keyspace.items(), None) is None, "a lent keyspace was not emptied"
        return keyspace

    def commit(self) -> None:
        """Commit every database lent out since the last :meth:`close`."""
        for db, _ in self._lent:
            db.commit()

    def close(self) -> None:
        """Give back every database lent out since the last call (emptied for the next)."""
        lent, self._lent = self._lent, []
        with contextlib.ExitStack() as stack:  # every one given back, whatever one raises
            for db, keyspace in lent:
                stack.callback(_DATABASES.take_back, db, [keyspace])


STATE_DIRS = StateDirs()
"""The databases behind the persistent entries of the store registries."""
