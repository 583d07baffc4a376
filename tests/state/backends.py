"""The registry of versioned store backends every state test runs against, and StateDB helpers.

A backend joins the data-driven conformance scenarios, the contract checker and the
property tests by adding one entry: a factory taking the store's keyword options
(``history_retention_ms``, and optionally ``segment_interval_ms`` and ``max_versions``) and
returning a new, empty store for ``str`` keys serialized as UTF-8 and ``str`` values.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topology.state.api import VersionedKeyValueStore
from topology.state.memory import InMemoryVersionedKeyValueStore
from topology.state.rocksdb import Keyspace, StateDB


def _memory(**options: Any) -> VersionedKeyValueStore:
    return InMemoryVersionedKeyValueStore("test", str.encode, **options)


VERSIONED_BACKENDS: dict[str, Callable[..., VersionedKeyValueStore]] = {
    "memory": _memory,
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

    def keyspace(self, name: str) -> Keyspace:
        """A keyspace of a fresh StateDB in a fresh temporary directory."""
        directory = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="stores-"))
        db = self._stack.enter_context(StateDB.open(Path(directory) / "state"))
        return db.keyspace(name)

    def close(self) -> None:
        """Close every database opened so far and remove its directory."""
        self._stack.close()


STATE_DIRS = StateDirs()
"""The databases behind the persistent entries of the store registries."""
