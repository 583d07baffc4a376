"""Persistent key-value store on a StateDB keyspace: the in-memory store's behaviour, on disk.

Layout, one keyspace per store:

* key: the serialized key (the store's ``key_serializer``; a key that serializes to ``None``
  is stored under ``b""``, where the in-memory store sorts it), so RocksDB's unsigned byte
  order is the store's key order;
* value: the entry of :func:`~topology.state.rocksdb.entry.pack_entry` (timestamp, value,
  original key). A lookup decodes the value alone; a scan decodes the key too, so it
  returns the original key objects without a key deserializer.

The store keeps nothing of the data in Python: reads go to the keyspace (which sees its own
pending writes), writes are pending in the keyspace until the owner commits the
:class:`~topology.state.rocksdb.StateDB`. An entry that surely encodes (numbers, ASCII
strings: :func:`~topology.state.rocksdb.entry.holds`) is held unencoded by the keyspace until
the commit, and read back as it was written: a running count is encoded once per commit, not
once per record. The store never commits, rolls back or closes the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .closable import ClosableStore
from .codec import prefix_end
from .entry import unpack_entry
from .keyspace import Keyspace

__all__ = ("RocksDBKeyValueStore",)

class RocksDBKeyValueStore(ClosableStore):
    """Key-value store of ``key -> (value, timestamp)`` in a keyspace; reads return values.

    Behaves as :class:`~topology.state.memory.InMemoryKeyValueStore`: range queries follow
    the order of the serialized keys (unsigned bytes), ``None`` bounds are open, forward and
    backward iteration give exactly reversed sequences, and once :meth:`close` ran every
    operation raises :class:`~topology.errors.StoreClosedError`. Keys are equal when their
    serialized bytes are. Keys and values are written with the state codec
    (:mod:`topology.state.codec`), which refuses types it does not know.

    The data lives in ``keyspace`` only: constructing the store again on the same keyspace
    (after a commit and a restart, say) gives the same contents.

    Methods: looking up (:meth:`get`, :meth:`get_with_timestamp`, :meth:`range`,
    :meth:`reverse_range`, :meth:`all`, :meth:`reverse_all`, :meth:`prefix_scan`,
    :meth:`reverse_prefix_scan`, :meth:`approximate_num_entries`),
    writing (:meth:`put`, :meth:`put_if_absent`, :meth:`delete`, :meth:`put_with_timestamp`,
    :meth:`upsert`), miscellany (:meth:`close`, :attr:`written`).

    Runtime complexity: get/put/delete are one keyspace lookup or write (O(1) plus RocksDB's
    lookup); a range query is one ordered keyspace iteration, O(log n + k) for k results;
    counting the entries reads them all.

    >>> import tempfile
    >>> from topology.state.rocksdb import StateDB
    >>> with tempfile.TemporaryDirectory() as tmp, StateDB.open(tmp + "/s") as db:
    ...     s = RocksDBKeyValueStore("s", str.encode, db.keyspace("s"))
    ...     s.put("b", 2); s.put("a", 1)
    ...     db.commit()
    ...     list(s.all()), list(s.reverse_range("a", "b"))
    ([('a', 1), ('b', 2)], [('b', 2), ('a', 1)])

    :param key_serializer: the bytes of a key; they define equality and order.
    :param keyspace: where the data lives; the store owns it (no other writer).
    """

    persistent = True

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes | None],
                 keyspace: Keyspace) -> None:
        """Open the store on ``keyspace``; whatever it holds is the store's content.

        Runtime complexity: one keyspace read (whether it holds anything).

        :raises StateStoreError: the keyspace's database is closed or failed.
        """
        self.name = name
        self._key_bytes = key_serializer
        self._keyspace = keyspace
        self._get: Callable[[bytes], bytes | None] = keyspace.get
        self._put: Callable[[bytes, bytes], None] = keyspace.put
        self._delete: Callable[[bytes], None] = keyspace.delete
        self._written = next(keyspace.items(), None) is not None
        self._hold(keyspace)

    @property
    def written(self) -> bool:
        """Whether anything was put or deleted (deletes of absent keys included).

        Kafka logs every write of a store to its changelog, so this says whether the
        changelog topic exists. A store constructed on a keyspace that holds data counts as
        written.
        """
        return self._written

    # -- hot path (used by the runtime with timestamps) ------------------------------------------

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None:
        """``(value, timestamp)`` of ``key``, or ``None``.

        :raises StoreClosedError: the store is closed.
        :raises StateCodecError: the stored entry is corrupt.
        """
        return self._read_entry(self._key_bytes(key) or b"")

    def put_with_timestamp(self, key: Any, value: Any, timestamp: int) -> None:
        """Store ``value`` at ``timestamp`` (ms); ``None`` deletes.

        :raises StoreClosedError: the store is closed.
        :raises StateCodecError: the key or the value cannot be written by the state codec.
        """
        self._write_entry(self._key_bytes(key) or b"", key, value, timestamp)
        self._written = True

    def upsert(self, key: Any, value: Any, timestamp: int) -> tuple[Any, int] | None:
        """Store ``value`` at ``timestamp`` (ms; ``None`` deletes); return the previous item.

        The previous item is ``(value, timestamp)`` or ``None``: one call for the
        table-source hot path. Deleting an absent key writes nothing.

        :raises StoreClosedError: the store is closed.
        :raises StateCodecError: the key or the value cannot be written by the state codec.
        """
        key_bytes = self._key_bytes(key) or b""
        previous = self._read_entry(key_bytes)
        if value is not None or previous is not None:
            self._write_entry(key_bytes, key, value, timestamp)
        self._written = True
        return previous

    # -- public key-value API ----------------------------------------------------------------


    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``.

        :raises StoreClosedError: the store is closed.
        """
        item = self._read_entry(self._key_bytes(key) or b"")
        return None if item is None else item[0]

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` for ``key`` (timestamp -1); ``None`` deletes.

        :raises StoreClosedError: the store is closed.
        :raises StateCodecError: the key or the value cannot be written by the state codec.
        """
        self.put_with_timestamp(key, value, -1)

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Store ``value`` only if ``key`` is absent; return the previous value (or ``None``).

        :raises StoreClosedError: the store is closed.
        """
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def delete(self, key: Any) -> Any:
        """Remove ``key``; return its old value (or ``None``).

        :raises StoreClosedError: the store is closed.
        """
        item = self.upsert(key, None, -1)
        return None if item is None else item[0]

    def _select(self, from_key: Any, to_key: Any, reverse: bool) -> Iterator[tuple[Any, Any]]:
        """The ``(key, value)`` pairs of ``[from_key, to_key]``, as of this call."""
        self._check_open()
        ser = self._key_bytes
        lo = None if from_key is None else ser(from_key) or b""
        hi = None if to_key is None else (ser(to_key) or b"") + b"\x00"  # inclusive bound
        return _pairs(self._keyspace.items(lo, hi, reverse))

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs with ``from_key <= key <= to_key`` in key-bytes order.

        Bounds compare serialized keys; ``None`` is open; ``from_key > to_key`` gives nothing.
        The iterator sees the store as of the call and reads it lazily.

        Runtime complexity: O(log n + k) for k pairs.

        :raises StoreClosedError: the store is closed.
        """
        return self._select(from_key, to_key, False)

    def reverse_range(self, from_key: Any = None, to_key: Any = None
                      ) -> Iterator[tuple[Any, Any]]:
        """The same pairs as :meth:`range`, in reverse order.

        :raises StoreClosedError: the store is closed.
        """
        return self._select(from_key, to_key, True)

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)`` in key-bytes order.

        :raises StoreClosedError: the store is closed.
        """
        return self._select(None, None, False)

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)`` in reverse key-bytes order.

        :raises StoreClosedError: the store is closed.
        """
        return self._select(None, None, True)

    def _prefixed(self, prefix: Any, prefix_serializer: Callable[[Any], bytes | None] | None,
                  reverse: bool) -> Iterator[tuple[Any, Any]]:
        self._check_open()
        start = (prefix_serializer or self._key_bytes)(prefix) or b""
        return _pairs(self._keyspace.items(start, prefix_end(start), reverse))

    def prefix_scan(self, prefix: Any,
                    prefix_serializer: Callable[[Any], bytes | None] | None = None
                    ) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs whose serialized key starts with the bytes of ``prefix``.

        In key-bytes order. ``prefix`` is serialized by ``prefix_serializer`` (default: the
        store's key serializer), as Kafka's ``prefixScan(prefix, serializer)``. The iterator
        sees the store as of the call and reads it lazily.

        Runtime complexity: O(log n + k) for k pairs.

        :raises StoreClosedError: the store is closed.
        """
        return self._prefixed(prefix, prefix_serializer, False)

    def reverse_prefix_scan(self, prefix: Any,
                            prefix_serializer: Callable[[Any], bytes | None] | None = None
                            ) -> Iterator[tuple[Any, Any]]:
        """:meth:`prefix_scan`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        """
        return self._prefixed(prefix, prefix_serializer, True)

    def approximate_num_entries(self) -> int:
        """Number of keys (exact: it counts them).

        Runtime complexity: O(n), a scan of the keyspace.

        :raises StoreClosedError: the store is closed.
        """
        self._check_open()
        return sum(1 for _ in self._keyspace.items())

    def __len__(self) -> int:
        """Number of keys; O(n) (see :meth:`approximate_num_entries`)."""
        return self.approximate_num_entries()

    def _check(self) -> None:
        """Assert the layout invariants over every entry (tests call it after operations).

        Each entry decodes to ``(key, value, timestamp)`` with nothing left over, its value is
        not ``None``, and its key serializes back to the entry's key bytes.
        """
        ser = self._key_bytes
        for key_bytes, raw in self._keyspace.items():
            key, value, _ = unpack_entry(raw)
            assert value is not None, f"{key_bytes!r}: a stored None (puts of None delete)"
            assert (ser(key) or b"") == key_bytes, f"{key_bytes!r}: the key {key!r} moved"


def _pairs(items: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
    """``(key, value)`` of each keyspace item, decoded as it is read."""
    for _, raw in items:
        key, value, _ = unpack_entry(raw)
        yield key, value
