"""In-memory key-value store: a dict, plus a key-bytes order kept sorted for range queries."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from operator import itemgetter
from typing import Any

from sortedcontainers import SortedKeyList

from ..._key_identity import key_identity, own_identity_type
from ...errors import StoreClosedError

__all__ = ("InMemoryKeyValueStore",)

_first = itemgetter(0)


class InMemoryKeyValueStore:
    """Key-value store of ``key -> (value, timestamp)``; reads return values.

    Range queries follow the order of the serialized keys (unsigned bytes), as Kafka's
    stores do; ``None`` bounds are open. Forward and backward iteration give exactly reversed
    sequences.

    Runtime complexity: get/put/delete O(1) until the first range query; from then on the
    key order is kept sorted, so a put that adds a key or a delete that removes one costs
    O(log n) (a put of an existing key still O(1)); a range or prefix query O(log n + k) for
    k pairs. The first range query sorts the keys once, O(n log n).

    The ``*_with_timestamp`` and ``upsert`` methods are the runtime's (processors call them
    while records flow); the rest is the public key-value API, which raises
    :class:`~topology.errors.StoreClosedError` once the store is closed.

    >>> s = InMemoryKeyValueStore("s", lambda k: k.encode())
    >>> s.put("b", 2); s.put("a", 1)
    >>> list(s.all()), list(s.reverse_range("a", "b"))
    ([('a', 1), ('b', 2)], [('b', 2), ('a', 1)])
    """

    persistent = False
    is_open = True
    """False once :meth:`close` ran; every public operation then raises ``StoreClosedError``."""

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes | None]) -> None:
        self.name = name
        self._key_bytes = key_serializer
        self._identity = key_identity(key_serializer)
        self._own = own_identity_type(key_serializer)
        self._data: dict[Hashable, tuple[Any, int]] = {}
        """identity -> item: keys are found by their identity (:mod:`topology._key_identity`)."""
        self._keys: dict[Hashable, Any] = {}
        """identity -> key, for the keys that are not their own identity."""
        self._order: SortedKeyList | None = None
        """``(key bytes, identity)`` pairs sorted by key bytes (ties in insertion order, as a stable
        sort of the dict would give), for range queries; ``None`` until the first one (a store
        that is never range-queried never serializes its keys), then kept up to date by every
        write that adds or removes a key."""
        self._deleted = False  # set by deletes only, so puts pay nothing for :attr:`written`

    @property
    def written(self) -> bool:
        """Whether anything was ever put or deleted (deletes of absent keys included).

        Kafka logs every write of a store to its changelog, so this says whether the
        changelog topic exists. A put leaves data behind unless a delete followed it.
        """
        return self._deleted or bool(self._data)

    # -- hot path (used by the runtime with timestamps) ------------------------------------------

    def _identity_of(self, key: Any) -> Hashable:
        """``key``'s identity; a key that is not its own is remembered (for iteration)."""
        if key.__class__ is self._own:
            return key
        identity = self._identity(key)
        if identity is not key:
            self._keys[identity] = key
        return identity

    def _key_of(self, identity: Hashable) -> Any:
        keys = self._keys
        return identity if not keys else keys.get(identity, identity)

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None:
        """``(value, timestamp)`` of ``key``, or ``None``."""
        return self._data.get(key if key.__class__ is self._own else self._identity(key))

    def put_with_timestamp(self, key: Any, value: Any, timestamp: int) -> None:
        """Store ``value`` at ``timestamp`` (ms); ``None`` deletes."""
        if value is None:
            self.delete(key)
            return
        data = self._data
        identity = self._identity_of(key)
        if identity not in data and self._order is not None:
            self._order.add((self._key_bytes(key) or b"", identity))
        data[identity] = (value, timestamp)

    def upsert(self, key: Any, value: Any, timestamp: int) -> tuple[Any, int] | None:
        """Store ``value`` at ``timestamp`` (``None`` deletes); return the previous item.

        The previous item is ``(value, timestamp)`` or ``None``: one call for the
        table-source hot path.
        """
        data = self._data
        if value is None:
            self._deleted = True
            return self._remove(key)
        identity = self._identity_of(key)
        item = data.get(identity)
        if item is None and self._order is not None:
            self._order.add((self._key_bytes(key) or b"", identity))
        data[identity] = (value, timestamp)
        return item

    def _remove(self, key: Any) -> tuple[Any, int] | None:
        """Remove ``key`` (by identity); its item, or ``None`` if absent."""
        identity = key if key.__class__ is self._own else self._identity(key)
        item = self._data.pop(identity, None)
        if item is None:
            return None
        if self._order is not None:
            self._order.remove((self._key_bytes(self._key_of(identity)) or b"", identity))
        self._keys.pop(identity, None)
        return item

    # -- public key-value API ----------------------------------------------------------------

    def close(self) -> None:
        """Close the store (idempotent): its data is dropped, and operations raise."""
        self.is_open = False
        self._data.clear()
        self._keys.clear()
        self._order = None

    def _check_open(self) -> None:
        if not self.is_open:
            raise StoreClosedError(f"state store {self.name!r} is closed")

    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""
        self._check_open()
        item = self.get_with_timestamp(key)
        return None if item is None else item[0]

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` for ``key`` (timestamp -1); ``None`` deletes."""
        self._check_open()
        self.put_with_timestamp(key, value, -1)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Store ``value`` only if ``key`` is absent; return the previous value (or ``None``)."""
        self._check_open()
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def delete(self, key: Any) -> Any:
        """Remove ``key``; return its old value (or ``None``)."""
        self._check_open()
        self._deleted = True
        item = self._remove(key)
        return None if item is None else item[0]

    def _sorted(self) -> SortedKeyList:
        """The key order, built on the first call (a stable sort of the dict's keys)."""
        order = self._order
        if order is None:
            ser = self._key_bytes
            order = self._order = SortedKeyList(
                ((ser(self._key_of(i)) or b"", i) for i in self._data), key=_first)
        return order

    def _select(self, from_key: Any, to_key: Any) -> list[tuple[Any, Any]]:
        self._check_open()
        lo = None if from_key is None else self._key_bytes(from_key) or b""
        hi = None if to_key is None else self._key_bytes(to_key) or b""
        order = self._sorted()
        first = 0 if lo is None else order.bisect_key_left(lo)
        last = len(order) if hi is None else order.bisect_key_right(hi)
        if first >= last:
            return []
        data, key_of = self._data, self._key_of
        return [(key_of(i), data[i][0]) for _, i in order.islice(first, last)]

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs with ``from_key <= key <= to_key`` in key-bytes order.

        Bounds compare serialized keys; ``None`` is open; ``from_key > to_key`` gives nothing.
        """
        return iter(self._select(from_key, to_key))

    def reverse_range(self, from_key: Any = None, to_key: Any = None
                      ) -> Iterator[tuple[Any, Any]]:
        """The same pairs as :meth:`range`, in reverse order."""
        return reversed(self._select(from_key, to_key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)`` in key-bytes order."""
        return self.range(None, None)

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)`` in reverse key-bytes order."""
        return self.reverse_range(None, None)

    def _prefixed(self, prefix: Any, prefix_serializer: Callable[[Any], bytes | None] | None
                  ) -> list[tuple[Any, Any]]:
        self._check_open()
        start = (prefix_serializer or self._key_bytes)(prefix) or b""
        order = self._sorted()
        data = self._data
        out = []
        for kb, identity in order.islice(order.bisect_key_left(start)):
            if not kb.startswith(start):
                break
            out.append((self._key_of(identity), data[identity][0]))
        return out

    def prefix_scan(self, prefix: Any,
                    prefix_serializer: Callable[[Any], bytes | None] | None = None
                    ) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs whose serialized key starts with the bytes of ``prefix``.

        In key-bytes order. ``prefix`` is serialized by ``prefix_serializer`` (default: the
        store's key serializer), as Kafka's ``prefixScan(prefix, serializer)``.

        Runtime complexity: O(log n + k) for k pairs (the first range or prefix query of the
        store sorts its keys once, O(n log n)).

        :raises StoreClosedError: the store is closed.
        """
        return iter(self._prefixed(prefix, prefix_serializer))

    def reverse_prefix_scan(self, prefix: Any,
                            prefix_serializer: Callable[[Any], bytes | None] | None = None
                            ) -> Iterator[tuple[Any, Any]]:
        """:meth:`prefix_scan`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        """
        return reversed(self._prefixed(prefix, prefix_serializer))

    def approximate_num_entries(self) -> int:
        """Number of keys."""
        self._check_open()
        return len(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def _check(self) -> None:
        """Assert the invariants (tests call it after operations).

        The key order, once built, holds each key of the dict once, with its key bytes,
        sorted by them.
        """
        for identity, key in self._keys.items():
            assert identity in self._data and self._identity(key) == identity, "stale key"
        order = self._order
        if order is None:
            return
        assert len(order) == len(self._data), "key order and dict differ in size"
        ser = self._key_bytes
        previous = None
        for kb, identity in order:
            key = self._key_of(identity)
            assert identity in self._data, f"{key!r} ordered but not stored"
            assert (ser(key) or b"") == kb, f"{key!r}: stale key bytes {kb!r}"
            assert previous is None or previous <= kb, f"{key!r} out of order"
            previous = kb
        assert {i for _, i in order} == self._data.keys(), "key order and dict differ"

