"""The spilling suppression buffer: a bounded memory tier over an ordered on-disk tier.

Used by ``BufferConfig...spill_to_disk_when_full()``. The buffer holds exactly what an
unbounded buffer would, emits exactly the same entries in the same order, and keeps at most
``records_limit`` entries and ``bytes_limit`` bytes (Kafka's estimate,
:func:`~suppress.entry.entry_size`) in memory; the rest lives in an ordered byte store, in
practice a RocksDB keyspace (``topology`` hands one in; this package never imports it).

**The tiers.** Entries are ordered by ``(buffer time, key bytes)`` as in every suppression
buffer, and the memory tier always holds a *prefix* of that order: every entry in memory comes
before every entry on disk. So the head (the next entry to evict) is in memory whenever memory
holds anything, and eviction takes the memory tier's head, then, once memory is empty, moves
the next run of entries up from disk (a range scan) and goes on. When a put takes the memory
tier over a bound, its *newest* entries (the tail) go down to disk; a new key that sorts after
the disk tier's first entry goes straight to disk. The two tiers never hold the same key.

**On disk.** One store, two areas, told apart by the first byte of a key:

- entries, ``b"e" + key bytes -> record``: found by key bytes, so an update to a spilled key
  is one read and one write, in place;
- order, ``b"o" + time + key bytes -> b""``: ``time`` is 8 bytes big-endian with the sign bit
  flipped, so an ordered scan gives ``(buffer time, key bytes)`` order, bytes unsigned.

A record is ``version (1 byte) | length of the stable part (4) | buffer time (8) | size (8) |
stable | latest`` (integers big-endian, signed): the *stable* part (the key object, the prior
value and, when bytes are tracked, the prior value's serialized bytes) is written once when the
key enters the buffer and copied as is on update; the *latest* part holds the latest change
and context ``(new, old, timestamp, offset, topic, partition, headers)``. Both parts are
encoded by the injected codec (the state codec of ``topology``, which reads back the same
Python objects and runs no code of the data's choosing). ``size`` is the entry's size in
bytes when tracked, else 0.

**Keys.** A spilled key is found by its serialized bytes, so in this buffer two keys are the
same key exactly when their bytes are equal (the memory tier is indexed by bytes too). With
any serde that gives distinct keys distinct bytes, every built-in one, that is what key
equality says.

**Commits.** The store keeps its writes in memory until committed; the buffer calls the
injected ``commit`` every :attr:`SpillingBuffer.COMMIT_EVERY` writes so that they do not pile
up, and the owner of the store commits at its own boundaries as well.

Runtime complexity: a put to a key in memory O(1) (O(log m) for a new key, m entries in
memory); to a spilled key one store read and one write; a new key past the memory tier one
read (a miss) and two writes. Evicting the head O(log m), plus, once per ``m`` entries, one
range scan and batched reads to move the next run up from disk.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, Protocol

from sortedcontainers import SortedList

from .buffer import serialized_key
from .entry import BufferedEntry, RecordContext, context_size, entry_size
from .errors import LONG_MAX, SuppressError

__all__ = ("OrderedByteStore", "SpillBackend", "SpillFormatError", "SpillingBuffer",
           "order_key")

EvictCallback = Callable[[BufferedEntry], None]

FORMAT_VERSION: Final = 1
"""The record format this module writes and reads."""

_ENTRY: Final = b"e"
_ORDER: Final = b"o"
_ORDER_END: Final = b"p"  # the first key after the order area
_HEADER: Final = struct.Struct(">BIqq")  # version, length of the stable part, time, size
_HEADER_LEN: Final = _HEADER.size
_TIME: Final = struct.Struct(">Q")
_SIGN: Final = 1 << 63


class OrderedByteStore(Protocol):
    """An ordered map of bytes to bytes: what the disk tier needs (a RocksDB keyspace has it).

    Reads see the store's own writes at once; keys order as unsigned bytes.
    """

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None``."""
        ...

    def multi_get(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """The values of ``keys`` in order (``None`` for an absent key)."""
        ...

    def put(self, key: bytes, value: bytes) -> None:
        """Set ``key`` to ``value``."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key`` (absent keys are fine)."""
        ...

    def items(self, lo: bytes | None = None, hi: bytes | None = None,
              reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` for the keys in ``[lo, hi)``, in order (``None``: open)."""
        ...


@dataclass(frozen=True, slots=True)
class SpillBackend:
    """What a spilling buffer gets from its runtime.

    :param open_store: opens the buffer's own, empty store; called once, at the first spill.
    :param commit: makes the store's pending writes durable (and frees their memory).
    :param encode: bytes of a key or value object, a tuple of them, ints, strs, bytes and
        ``None``; raises for a value it cannot write.
    :param decode: the object :attr:`encode` wrote.
    """

    open_store: Callable[[], OrderedByteStore]
    commit: Callable[[], None]
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


class SpillFormatError(SuppressError):
    """A record in a spill store that this version did not write (or that is corrupt)."""


def order_key(time: int, key_bytes: bytes) -> bytes:
    """The disk tier's order key of an entry: sorts as ``(time, key_bytes)``.

    ``time`` (ms) is 8 bytes big-endian with the sign bit flipped, so negative times sort
    first.

    >>> order_key(-1, b"k") < order_key(0, b"") < order_key(0, b"a") < order_key(256, b"")
    True
    """
    return _ORDER + _TIME.pack(time + _SIGN) + key_bytes


def _time_of(order: bytes) -> int:
    """The buffer time of an order key."""
    value: int = _TIME.unpack_from(order, 1)[0]
    return value - _SIGN


class SpillingBuffer:
    """A suppression buffer whose memory tier is bounded and whose overflow goes to disk.

    Same interface and same results as :class:`~suppress.buffer.TimeOrderedBuffer` (the
    processor cannot tell them apart); see the module docstring for the layout.

    :param key_serializer: gives a key's bytes (its place in the order, its identity).
    :param value_serializer: gives a value's bytes, for byte accounting.
    :param records_limit: at most this many entries in memory (``None``: no count bound).
    :param bytes_limit: at most this many bytes in memory (``None``: no bytes bound).
    :param backend: the store, its commit and the codec (see :class:`SpillBackend`).
    :param track_bytes: keep every entry's size up to date (forced with ``bytes_limit``);
        otherwise :attr:`size_bytes` is computed on demand, reading the disk tier.
    """

    COMMIT_EVERY: int = 10_000
    """Store writes between two commits. Pending writes cost memory until committed; a
    commit costs a RocksDB write batch. ``benchmarks/spill.py`` measured 2 k, 10 k and 50 k
    within a few percent of each other; 10 k keeps the pending writes around a megabyte."""

    REFILL_BATCH: int = 1_000
    """Entries read per batched lookup when the memory tier is filled up from disk."""

    def __init__(
        self,
        key_serializer: Callable[[Any], bytes],
        value_serializer: Callable[[Any], bytes | None],
        records_limit: int | None,
        bytes_limit: int | None,
        backend: SpillBackend,
        track_bytes: bool = False,
    ) -> None:
        self._key_ser = key_serializer
        self._value_ser = value_serializer
        self._records_limit = records_limit
        self._bytes_limit = bytes_limit
        self._track_bytes = track_bytes or bytes_limit is not None
        self._backend = backend
        self._encode = backend.encode
        self._decode = backend.decode
        self._memory: dict[bytes, BufferedEntry] = {}  # key bytes -> entry
        self._order = SortedList()  # (time, key bytes) of the memory tier
        self._memory_bytes = 0
        self._store: OrderedByteStore | None = None  # opened at the first spill
        self._disk_count = 0
        self._disk_bytes = 0  # tracked sizes of the disk tier's entries
        self._disk_head: bytes | None = None  # the disk tier's first order key
        self._writes = 0  # store writes since the last commit

    # -- adding ------------------------------------------------------------------------------

    def put(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """Buffer ``Change(new, old)`` for ``key``, wherever the key is.

        A key already buffered keeps its buffer time and prior value; its latest change and
        context (and size) are replaced, in memory or in place on disk. A new key is buffered
        at ``time`` with ``prior = old``, in memory if it sorts before the disk tier,
        otherwise on disk; then the memory tier's newest entries go to disk while it is over
        a bound.

        :raises TypeError: if the key serializer gives anything but bytes.
        :raises Exception: whatever the codec raises for a value it cannot write; the buffer
            is left as it was.
        """
        key_bytes = serialized_key(self._key_ser, key)
        entry = self._memory.get(key_bytes)
        if entry is not None:
            if self._track_bytes:  # sized first: a serializer error leaves the entry as it was
                size = self._size_of(key_bytes, entry.prior, old, new, context)
                self._memory_bytes += size - entry.size
                entry.size = size
            entry.new = new
            entry.old = old
            entry.context = context
            if self._bytes_limit is not None and self._memory_bytes > self._bytes_limit:
                self._spill_tail()
            return
        if self._disk_count:
            record = self._store.get(_ENTRY + key_bytes)  # type: ignore[union-attr]
            if record is not None:
                self._update_on_disk(key_bytes, record, new, old, context)
                return
        entry = BufferedEntry(time, key_bytes, key, new, old, old, context)
        if self._track_bytes:
            entry.size = self._size_of(key_bytes, old, old, new, context)
        head = self._disk_head
        if head is not None and order_key(time, key_bytes) > head:
            self._write_new(entry, self._record(entry))
            return
        self._memory[key_bytes] = entry
        self._order.add((time, key_bytes))
        self._memory_bytes += entry.size
        self._spill_tail()

    def _update_on_disk(self, key_bytes: bytes, record: bytes, new: Any, old: Any,
                        context: RecordContext) -> None:
        """Replace the latest part of a spilled entry's record (the stable part is copied)."""
        version, stable_len, time, previous = _HEADER.unpack_from(record)
        if version != FORMAT_VERSION:
            raise _format_error(record)
        stable_end = _HEADER_LEN + stable_len
        latest = self._encode((new, old, *context))
        if self._track_bytes:
            _key, _prior, prior_bytes = self._decode(record[_HEADER_LEN:stable_end])
            size = entry_size(key_bytes, prior_bytes, self._bytes_of(old), self._bytes_of(new),
                              context_size(context))
            record = _HEADER.pack(FORMAT_VERSION, stable_len, time, size) \
                + record[_HEADER_LEN:stable_end] + latest
            self._disk_bytes += size - previous
        else:
            record = record[:stable_end] + latest
        self._store.put(_ENTRY + key_bytes, record)  # type: ignore[union-attr]
        self._wrote(1)

    def _size_of(self, key_bytes: bytes, prior: Any, old: Any, new: Any,
                 context: RecordContext) -> int:
        """Kafka's size of an entry holding these values (serialized here)."""
        prior_b = self._bytes_of(prior)
        old_b = prior_b if old is prior else self._bytes_of(old)
        return entry_size(key_bytes, prior_b, old_b, self._bytes_of(new), context_size(context))

    def _bytes_of(self, value: Any) -> bytes | None:
        return None if value is None else self._value_ser(value)

    # -- moving between the tiers ------------------------------------------------------------

    def _over(self) -> bool:
        """Whether the memory tier is over a bound."""
        limit = self._records_limit
        if limit is not None and len(self._memory) > limit:
            return True
        limit = self._bytes_limit
        return limit is not None and self._memory_bytes > limit

    def _spill_tail(self) -> None:
        """Move the memory tier's newest entries to disk while it is over a bound.

        Each is encoded before it leaves memory: if the codec raises, it stays there (the
        memory tier is then over its bound, and nothing is lost).
        """
        memory, order = self._memory, self._order
        while memory and self._over():
            entry = memory[order[-1][1]]
            record = self._record(entry)
            order.pop()
            del memory[entry.key_bytes]
            self._memory_bytes -= entry.size
            self._write_new(entry, record)

    def _write_new(self, entry: BufferedEntry, record: bytes) -> None:
        """Write ``entry``, encoded as ``record``, to the disk tier (it is in neither tier)."""
        store = self._store
        if store is None:
            store = self._store = self._backend.open_store()
        order = order_key(entry.time, entry.key_bytes)
        store.put(_ENTRY + entry.key_bytes, record)
        store.put(order, b"")
        self._disk_count += 1
        self._disk_bytes += entry.size
        head = self._disk_head
        if head is None or order < head:
            self._disk_head = order
        self._wrote(2)

    def _record(self, entry: BufferedEntry) -> bytes:
        """The disk record of ``entry`` (see the module docstring)."""
        prior = entry.prior
        prior_bytes = self._bytes_of(prior) if self._track_bytes else None
        stable = self._encode((entry.key, prior, prior_bytes))
        latest = self._encode((entry.new, entry.old, *entry.context))
        return _HEADER.pack(FORMAT_VERSION, len(stable), entry.time, entry.size) + stable + latest

    def _entry(self, key_bytes: bytes, record: bytes) -> BufferedEntry:
        """The entry a disk record holds (``key_bytes``: its key's bytes)."""
        version, stable_len, time, size = _HEADER.unpack_from(record)
        if version != FORMAT_VERSION:
            raise _format_error(record)
        stable_end = _HEADER_LEN + stable_len
        key, prior, _prior_bytes = self._decode(record[_HEADER_LEN:stable_end])
        new, old, timestamp, offset, topic, partition, headers = self._decode(
            record[stable_end:])
        entry = BufferedEntry(time, key_bytes, key, new, old, prior,
                              RecordContext(timestamp, offset, topic, partition, headers))
        entry.size = size
        return entry

    def _refill(self) -> None:
        """Move the disk tier's first entries up to the (empty) memory tier, while they fit.

        Runtime complexity: O(k log k) for k entries moved, plus one range scan and a batched
        read per :attr:`REFILL_BATCH` entries.
        """
        store = self._store
        assert store is not None and not self._memory
        records_limit, bytes_limit = self._records_limit, self._bytes_limit
        orders = (order for order, _ in store.items(self._disk_head, _ORDER_END))
        moved = 0
        while True:
            want = self.REFILL_BATCH
            if records_limit is not None:
                want = min(want, records_limit - moved)
            batch = list(islice(orders, want)) if want > 0 else []
            if not batch:
                break
            records = store.multi_get([_ENTRY + order[9:] for order in batch])
            for order, record in zip(batch, records, strict=True):
                if record is None:
                    raise SpillFormatError(f"the spill store lost the entry of {order!r}")
                size = _HEADER.unpack_from(record)[3]
                if bytes_limit is not None and self._memory_bytes + size > bytes_limit:
                    self._disk_head = order
                    return
                entry = self._entry(order[9:], record)
                self._memory[entry.key_bytes] = entry
                self._order.add((entry.time, entry.key_bytes))
                self._memory_bytes += size
                self._remove_from_disk(order, size)
                moved += 1
        self._disk_head = next(orders, None)

    def _remove_from_disk(self, order: bytes, size: int) -> None:
        """Delete a disk entry (the caller fixes the disk head)."""
        store = self._store
        assert store is not None
        store.delete(_ENTRY + order[9:])
        store.delete(order)
        self._disk_count -= 1
        self._disk_bytes -= size
        self._wrote(2)

    def _wrote(self, n: int) -> None:
        """Count ``n`` store writes; commit once :attr:`COMMIT_EVERY` are pending."""
        self._writes += n
        if self._writes >= self.COMMIT_EVERY:
            self._writes = 0
            self._backend.commit()

    # -- removing ----------------------------------------------------------------------------

    def _evict_head(self, callback: EvictCallback) -> None:
        """Hand the head entry to ``callback``, then remove it (kept if the callback raises).

        The buffer must not be empty.
        """
        if not self._memory:
            self._refill()
            if not self._memory:  # no room in memory even for the head: evict it from disk
                self._evict_disk_head(callback)
                return
        order = self._order
        entry = self._memory[order[0][1]]
        callback(entry)
        order.pop(0)
        del self._memory[entry.key_bytes]
        self._memory_bytes -= entry.size

    def _evict_disk_head(self, callback: EvictCallback) -> None:
        """:meth:`_evict_head` straight from disk (a memory tier that cannot hold the head)."""
        store = self._store
        head = self._disk_head
        assert store is not None and head is not None
        record = store.get(_ENTRY + head[9:])
        if record is None:
            raise SpillFormatError(f"the spill store lost the entry of {head!r}")
        entry = self._entry(head[9:], record)
        callback(entry)
        self._remove_from_disk(head, entry.size)
        self._disk_head = next((order for order, _ in store.items(head, _ORDER_END)), None)

    def evict_while(self, predicate: Callable[[], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while the buffer is not empty and ``predicate()``.

        ``callback(entry)`` runs *before* the entry is removed, so inside it
        ``num_records``, ``size_bytes`` and ``min_time`` still include the entry. If the
        callback raises, the entry stays buffered. Afterwards, an emptied memory tier is
        filled up from disk.

        :return: the number of evicted entries.
        """
        evicted = 0
        try:
            while (self._memory or self._disk_count) and predicate():
                self._evict_head(callback)
                evicted += 1
        finally:
            if not self._memory and self._disk_count:
                self._refill()
        return evicted

    def evict_over(self, records_limit: int | None, bytes_limit: int | None,
                   callback: EvictCallback) -> int:
        """Evict head entries while the whole buffer is over a limit (``None``: no limit).

        A bytes limit needs tracked bytes. The processor never calls it for a spilling
        buffer, which is never full; it is here for the buffer interface.

        :return: the number of evicted entries.
        """
        if bytes_limit is not None and not self._track_bytes:
            raise ValueError("a bytes limit needs a buffer that tracks bytes")
        return self.evict_while(
            lambda: (records_limit is not None and self.num_records > records_limit)
            or (bytes_limit is not None and self.size_bytes > bytes_limit), callback)

    def evict_due(self, is_due: Callable[[int], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while ``is_due(min_time)`` holds.

        ``is_due`` is the suppression's rule (:mod:`suppress.time`) applied to the head's
        buffer time (ms); it is never called on an empty buffer. As :meth:`evict_while`.

        :return: the number of evicted entries.
        """
        min_time = self._min_time
        return self.evict_while(lambda: is_due(min_time()), callback)

    # -- looking up --------------------------------------------------------------------------

    def prior_value(self, key: Any) -> tuple[bool, Any]:
        """Return ``(True, prior)`` for a buffered key, else ``(False, None)``.

        A spilled key's prior value is read from disk.
        """
        entry = self.get(key)
        if entry is None:
            return False, None
        return True, entry.prior

    def get(self, key: Any) -> BufferedEntry | None:
        """The buffered entry of ``key`` (read from disk if spilled), or ``None``.

        A spilled entry comes back as a copy: changing it changes nothing buffered.
        """
        key_bytes = serialized_key(self._key_ser, key)
        entry = self._memory.get(key_bytes)
        if entry is not None or not self._disk_count:
            return entry
        store = self._store
        assert store is not None
        record = store.get(_ENTRY + key_bytes)
        return None if record is None else self._entry(key_bytes, record)

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return len(self._memory) + self._disk_count

    def __iter__(self) -> Iterator[BufferedEntry]:
        """Entries in eviction order: the memory tier's, then the disk tier's.

        Runtime complexity: O(n), reading the whole disk tier.
        """
        memory = self._memory
        for _time, key_bytes in list(self._order):
            yield memory[key_bytes]
        if self._disk_count:
            yield from self._disk_entries()

    def _disk_entries(self) -> Iterator[BufferedEntry]:
        store = self._store
        assert store is not None
        orders = (order for order, _ in store.items(_ORDER, _ORDER_END))
        while batch := list(islice(orders, self.REFILL_BATCH)):
            records = store.multi_get([_ENTRY + order[9:] for order in batch])
            for order, record in zip(batch, records, strict=True):
                if record is None:
                    raise SpillFormatError(f"the spill store lost the entry of {order!r}")
                yield self._entry(order[9:], record)

    @property
    def num_records(self) -> int:
        """Number of distinct buffered keys, both tiers."""
        return len(self._memory) + self._disk_count

    @property
    def size_bytes(self) -> int:
        """Sum of the buffered entries' sizes in bytes (Kafka's estimate), both tiers.

        Runtime complexity: O(1) with tracked bytes, else O(n), reading the disk tier.
        """
        if self._track_bytes:
            return self._memory_bytes + self._disk_bytes
        return sum(self._entry_size(e) for e in self)

    def _entry_size(self, entry: BufferedEntry) -> int:
        return self._size_of(entry.key_bytes, entry.prior, entry.old, entry.new, entry.context)

    def _min_time(self) -> int:
        order = self._order
        if order:
            time: int = order[0][0]
            return time
        head = self._disk_head
        return LONG_MAX if head is None else _time_of(head)

    @property
    def min_time(self) -> int:
        """Smallest buffer time (ms), or ``2**63 - 1`` when the buffer is empty."""
        return self._min_time()

    @property
    def tracks_bytes(self) -> bool:
        """Whether entry sizes are kept up to date on every put."""
        return self._track_bytes

    @property
    def memory_records(self) -> int:
        """Entries in the memory tier."""
        return len(self._memory)

    @property
    def memory_bytes(self) -> int:
        """Tracked bytes of the memory tier (0 unless bytes are tracked)."""
        return self._memory_bytes

    @property
    def disk_records(self) -> int:
        """Entries in the disk tier."""
        return self._disk_count

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (used by tests after each operation)."""
        memory, order = self._memory, self._order
        order._check()
        assert len(order) == len(memory), "memory index and order disagree"
        for time, key_bytes in order:
            entry = memory[key_bytes]
            assert entry.time == time and entry.key_bytes == key_bytes, "stale order"
            assert entry.key_bytes == self._key_ser(entry.key), "stale key bytes"
        assert not self._over(), "memory tier over its bounds"
        if self._track_bytes:
            assert self._memory_bytes == sum(e.size for e in memory.values()), "bytes drifted"
            for e in memory.values():
                assert e.size == self._entry_size(e), "stale entry size"
        else:
            assert self._memory_bytes == 0 and self._disk_bytes == 0
        store = self._store
        if store is None:
            assert self._disk_count == 0 and self._disk_head is None
            return
        orders = [o for o, _ in store.items(_ORDER, _ORDER_END)]
        entries = {k[1:]: v for k, v in store.items(_ENTRY, _ORDER)}
        assert [k for k, _ in store.items()] == sorted(
            [_ENTRY + k for k in entries] + orders), "foreign keys in the store"
        assert len(orders) == len(entries) == self._disk_count, "disk count drifted"
        assert sorted(o[9:] for o in orders) == sorted(entries), "disk areas disagree"
        assert self._disk_head == (orders[0] if orders else None), "stale disk head"
        assert not set(entries) & set(memory), "a key in both tiers"
        if orders and not memory:  # the head is in memory unless memory cannot hold it
            head_size = _HEADER.unpack_from(entries[orders[0][9:]])[3]
            assert self._records_limit == 0 or (
                self._bytes_limit is not None and head_size > self._bytes_limit), \
                "the memory tier is empty while it could hold the head"
        if orders and order:
            last = order[-1]
            assert order_key(last[0], last[1]) < orders[0], "memory is not a prefix"
        disk_bytes = 0
        for o in orders:
            entry = self._entry(o[9:], entries[o[9:]])
            assert entry.time == _time_of(o), "order key and record disagree on the time"
            assert entry.key_bytes == self._key_ser(entry.key), "stale spilled key bytes"
            disk_bytes += entry.size
            if self._track_bytes:
                assert entry.size == self._entry_size(entry), "stale spilled entry size"
        assert disk_bytes == self._disk_bytes, "disk bytes drifted"


def _format_error(record: bytes) -> SpillFormatError:
    return SpillFormatError(
        f"a spill record of format version {record[:1].hex() or 'none'}; this version reads "
        f"version {FORMAT_VERSION} only: the spill store was not written by this version")
