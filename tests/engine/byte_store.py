"""An in-memory ``OrderedByteStore`` for engine tests: what a RocksDB keyspace does, in a dict.

Like a keyspace, ``items`` is a view of the store when it was called: writes made while the
iteration runs do not show in it. ``writes`` counts puts and deletes, ``commits`` the
commits a spilling buffer asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sortedcontainers import SortedDict


class SortedByteStore:
    def __init__(self) -> None:
        self.data: SortedDict = SortedDict()
        self.writes = 0
        self.commits = 0
        self.opened = 0

    def open(self) -> SortedByteStore:
        """The store, as a ``SpillBackend.open_store`` (counted)."""
        self.opened += 1
        return self

    def commit(self) -> None:
        self.commits += 1

    def get(self, key: bytes) -> bytes | None:
        assert isinstance(key, bytes)
        return self.data.get(key)

    def multi_get(self, keys: Iterable[bytes]) -> list[bytes | None]:
        return [self.data.get(key) for key in keys]

    def put(self, key: bytes, value: bytes) -> None:
        assert isinstance(key, bytes) and isinstance(value, bytes)
        self.data[key] = value
        self.writes += 1

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)
        self.writes += 1

    def items(self, lo: bytes | None = None, hi: bytes | None = None,
              reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        keys = list(self.data.irange(lo, hi, inclusive=(True, False), reverse=reverse))
        return iter([(key, self.data[key]) for key in keys])
