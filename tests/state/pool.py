"""StateDBs reused between hypothesis examples instead of created for each.

Creating a StateDB (its directory, column families and first fsync) costs 13 to 100 ms,
more than most examples. :class:`Pool` keeps one database per property test (for tests that
also close and reopen it); :class:`Databases` lends open databases to the store registries
(``backends.py``) and takes them back emptied.
"""

from __future__ import annotations

import atexit
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from topology.state.rocksdb import Keyspace, StateDB


def emptied(db: StateDB, keyspaces: Iterable[Keyspace]) -> bool:
    """Drop ``db``'s pending writes, delete what was committed to ``keyspaces`` and commit
    that; whether they are empty now."""
    db.rollback()
    spaces = list(keyspaces)
    for keyspace in spaces:
        for key in [key for key, _ in keyspace.items()]:
            keyspace.delete(key)
    db.commit()
    return all(next(keyspace.items(), None) is None for keyspace in spaces)


class Databases:
    """Open StateDBs in one temporary directory, lent out and taken back emptied.

    A database taken back is emptied (:func:`emptied`) and lent again; one that cannot be
    emptied is closed. A failing example's database is emptied and lent again too: the
    stores read only what was written since, so hypothesis replays the failure as found.
    All of them are closed and removed at exit; one taken back after that is closed.
    """

    def __init__(self, prefix: str) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix=prefix)
        self._free: list[StateDB] = []
        self._closed = False
        atexit.register(self._close_all)

    def lend(self) -> StateDB:
        """An open database whose keyspaces are empty."""
        return self._free.pop() if self._free else StateDB.open(
            tempfile.mkdtemp(dir=self._directory.name))

    def take_back(self, db: StateDB, keyspaces: Iterable[Keyspace]) -> None:
        """Empty ``keyspaces`` (every keyspace of ``db`` that was used) and keep ``db`` for
        the next loan; close it if that fails or the pool is closed."""
        try:
            reusable = not self._closed and not db.closed and emptied(db, keyspaces)
        except Exception:
            reusable = False
        if reusable:
            self._free.append(db)
        else:
            db.close()

    def _close_all(self) -> None:
        self._closed = True
        while self._free:
            self._free.pop().close()
        self._directory.cleanup()


class Pool:
    """One database directory for all the examples of a property, emptied between them.

    Emptying the database the previous example left costs a commit. Each
    example still starts from an empty, committed keyspace (asserted), and an example that
    fails leaves its database closed and the next (hypothesis' shrinking) starts in a new
    directory, so a failure is replayed as it was found.
    """

    def __init__(self, factory: Any, name: str) -> None:
        self.factory = factory
        self.name = name
        self.path: Path | None = None
        self.db: StateDB | None = None

    def take(self, keyspace: str = "s") -> tuple[Path, StateDB]:
        if self.path is None:
            self.path = self.factory.mktemp(self.name) / "state"
        if self.db is None or self.db.closed:
            self.db = StateDB.open(self.path)
        assert emptied(self.db, [self.db.keyspace(keyspace)]), "a pooled database must start empty"
        return self.path, self.db

    def give_back(self, db: StateDB, failed: bool) -> None:
        if failed:
            db.close()
            self.path = self.db = None  # the next example starts in a new directory
        else:
            db.rollback()  # what the example left uncommitted
            self.db = db

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


@pytest.fixture(scope="module")
def pool(tmp_path_factory: Any) -> Iterator[Any]:
    """A :class:`Pool` per test of this module (hypothesis runs a test's examples in one call)."""
    pools: dict[str, Pool] = {}

    def get(name: str) -> Pool:
        return pools.setdefault(name, Pool(tmp_path_factory, name))

    yield get
    for each in pools.values():
        each.close()
