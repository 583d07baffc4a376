"""A StateDB per property test, emptied between its examples instead of created for each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topology.state.rocksdb import StateDB


class Pool:
    """One database directory for all the examples of a property, emptied between them.

    Creating a StateDB (its directory, column families and first fsync) costs about 100 ms,
    more than most examples; emptying the one the previous example left costs a commit. Each
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
        ks = self.db.keyspace(keyspace)
        for key, _ in list(ks.items()):
            ks.delete(key)
        self.db.commit()
        assert list(ks.items()) == [], "a pooled database must start empty"
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
