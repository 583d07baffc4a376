"""The spilling suppression buffer: a bounded memory tier over an ordered on-disk tier.

Used by ``BufferConfig...spill_to_disk_when_full()``. The buffer holds exactly what an
unbounded buffer would, emits exactly the same entries in the same order, and keeps at most
``records_limit`` entries and ``bytes_limit`` bytes (Kafka's estimate,
:func:`~suppress.entry.entry_size`) in memory; the rest lives in an ordered byte store, in
practice a RocksDB keyspace (``topology`` hands one in; this package never imports it).

**The tiers.** Entries are ordered by ``(buffer time, key bytes)`` as in every suppression
buffer, and the memory tier always holds a *prefix* of that order: every entry in memory comes
before every entry on disk. So the head (the next entry to evict) is in memory whenever memory
holds anything, and eviction takes the memory tier's head, then, once memory is empty, reads
the disk tier in order, in batches, and evicts from there; at the end of an eviction an empty
memory tier is filled up from the disk's head. When a put takes the memory tier over a bound,
its *newest* entries (the tail) go down to disk; a new key that sorts after the disk tier's
first entry goes straight to disk. The two tiers never hold the same key.

**On disk.** One store, two areas (:mod:`suppress.spill_record` has the byte layouts):

- entries, ``b"e" + key bytes -> record``: found by key bytes, so an update to a spilled key
  is one read and one write, in place, rewriting only the record's latest change;
- order, ``b"o" + time + key bytes -> b""``: an ordered scan of this area gives
  ``(buffer time, key bytes)`` order.

When a key's buffer time is a function of the key (final results: the window's end, given as
``time_of``), every put of a key knows where its entry is, and there is one area:
``b"o" + time + key bytes -> record``.

**Keys.** A spilled key is found by its serialized bytes, so in this buffer two keys are the
same key exactly when their bytes are equal (the memory tier is indexed by bytes too). With
any serde that gives distinct keys distinct bytes, every built-in one, that is what key
equality says.

**Staging.** A put to a key that is not in memory and sorts at or after the disk tier's first
entry cannot change the head of the buffer, so it waits in a small staging area (its change
already encoded) until :attr:`SpillingBuffer.STAGE_LIMIT` of them are resolved against the
disk tier with one sorted, batched lookup, or until something needs the disk tier as it is.

**Commits.** The store keeps its writes in memory until committed; the buffer calls the
injected ``commit`` every :attr:`SpillingBuffer.COMMIT_EVERY` writes so that they do not pile
up, and the owner of the store commits at its own boundaries as well. Each commit falls
between two operations, so the two areas on disk always agree.

**Restarts.** For a buffer kept across restarts the store is the durable copy, and the only
one: :meth:`SpillingBuffer.checkpoint` writes the memory tier's entries changed since the last
checkpoint (``b"m" + key bytes -> record``) and the disk tier's count and bytes into the
store, whose owner then commits it with the rest of its state (and passes a ``commit`` that
commits nothing in between, so that the store on disk is always as of a checkpoint). A new
buffer over that store takes it back with :meth:`SpillingBuffer.restore`, which reads the
memory tier's image and the figures, not the disk tier: the disk tier stays where it is and is
read lazily, in order, as eviction reaches it. Reopening costs the memory bound plus a
constant, whatever is spilled.

Runtime complexity: a put to a key in memory O(1) (O(log m) for a new key, m entries in
memory); to a key not in memory, a share of a batched read, then one write (two for a new
key). Evicting the head O(log m) from memory; from disk, a share of a range scan and of a
batched read, and two deletes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple, Protocol

from sortedcontainers import SortedList

from .buffer import serialized_key
from .entry import BufferedEntry, RecordContext, context_size, entry_size
from .errors import LONG_MAX
from .spill_record import (
    ENTRY_END,
    ENTRY_PREFIX,
    KEYED,
    MEMORY_END,
    MEMORY_PREFIX,
    ORDER_END,
    ORDER_KEY_PREFIX_LEN,
    ORDER_START,
    STATS_KEY,
    TRACKED,
    RecordCodec,
    SpillFormatError,
    order_key,
    pack_stats,
    record_size,
    time_of_order,
    unpack_stats,
)

__all__ = ("OrderedByteStore", "SpillBackend", "SpillingBuffer")

EvictCallback = Callable[[BufferedEntry], None]
_SKIP = ORDER_KEY_PREFIX_LEN


class _Staged(NamedTuple):
    """A staged put: what a new entry would start with, and the encoded latest change."""

    time: int
    key: Any
    prior: Any
    latest: bytes
    order: bytes  # the order key at ``time``


class OrderedByteStore(Protocol):
    """An ordered map of bytes to bytes: what the disk tier needs (a RocksDB keyspace has it).

    Reads see the store's own writes at once; keys order as unsigned bytes; ``items`` is a
    view of the store when it was called (writes made while iterating do not show in it).
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

    :param open_store: opens the buffer's own store; called once, at the first spill (or
        checkpoint, or restore). Empty, unless the buffer is to :meth:`~SpillingBuffer.restore`
        what it holds.
    :param commit: makes the store's pending writes durable (and frees their memory). For a
        buffer kept across restarts (see :meth:`~SpillingBuffer.checkpoint`), a function that
        commits nothing: the owner commits the store, after a checkpoint.
    :param encode: bytes of a key or value (the record writes ``None``, 64-bit ints, ``str``
        and ``bytes`` itself, and hands anything else here); raises for one it cannot write.
    :param decode: the object :attr:`encode` wrote.
    """

    open_store: Callable[[], OrderedByteStore]
    commit: Callable[[], None]
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


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
    :param time_of: the buffer time of a key, when it is a function of the key (final
        results: the window's end), so that every put of a key carries the same time. A
        spilled entry is then found by its order key, and the disk tier is one area
        (``o`` + time + key bytes -> record): half the keys and writes of the two-area
        layout, and eviction reads records straight from its range scan. ``None``: a key's
        buffer time is its first put's (time limits), kept in the entries area.
    """

    COMMIT_EVERY: int = 500
    """Store writes between two commits. Pending writes are held in memory (a dict in the
    keyspace) until committed, and a commit costs a RocksDB write batch. In
    ``benchmarks/spill.py`` 1 k writes per commit took about 6 MB less peak RSS than 10 k,
    and 500 about 1 MB less again, within the noise of the throughput."""

    REFILL_BATCH: int = 500
    """Entries read per batched lookup when entries come up from disk."""

    STAGE_LIMIT: int = 500
    """Puts held in the staging area before one batched lookup resolves them (see
    :meth:`put`). Looking up a batch of sorted keys costs less than one lookup per key (in
    ``benchmarks/spill.py`` staging took the spilling run from 0.25x to 0.29x of the
    unbounded run's throughput); the staged entries are in memory, beside the memory tier,
    until then."""

    def __init__(
        self,
        key_serializer: Callable[[Any], bytes],
        value_serializer: Callable[[Any], bytes | None],
        records_limit: int | None,
        bytes_limit: int | None,
        backend: SpillBackend,
        track_bytes: bool = False,
        time_of: Callable[[Any], int] | None = None,
    ) -> None:
        self._key_ser = key_serializer
        self._time_of = time_of
        self._keyed = time_of is not None  # one area: the order key finds the record
        self._value_ser = value_serializer
        self._records_limit = records_limit
        self._bytes_limit = bytes_limit
        self._track_bytes = track_bytes or bytes_limit is not None
        self._backend = backend
        self._codec = RecordCodec(backend.encode, backend.decode)
        self._memory: dict[bytes, BufferedEntry] = {}  # key bytes -> entry
        self._order = SortedList()  # (time, key bytes) of the memory tier
        self._memory_bytes = 0
        self._store: OrderedByteStore | None = None  # opened at the first spill
        self._get: Callable[[bytes], bytes | None] | None = None  # the store's, bound
        self._put: Callable[[bytes, bytes], None] | None = None
        self._disk_count = 0
        self._disk_bytes = 0  # tracked sizes of the disk tier's entries
        self._disk_head: bytes | None = None  # the disk tier's first order key
        self._min = LONG_MAX  # the smallest buffer time (ms), kept by _reset_min
        self._writes = 0  # store writes since the last commit
        self._staged: dict[bytes, _Staged] = {}  # puts not yet looked up on disk
        self._stage = not self._track_bytes  # a size needs the disk record: no staging
        self._image: set[bytes] | None = None
        """Key bytes whose memory-tier entry changed (or came or left) since the last
        checkpoint; ``None`` before the first checkpoint or restore (nothing is tracked)."""

    # -- adding ------------------------------------------------------------------------------

    def put(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """Buffer ``Change(new, old)`` for ``key``, wherever the key is.

        A key already buffered keeps its buffer time and prior value; its latest change and
        context (and size) are replaced, in memory or in place on disk. A new key is buffered
        at ``time`` with ``prior = old``, in memory if it sorts before the disk tier,
        otherwise on disk; then the memory tier's newest entries go to disk while it is over
        a bound.

        A put to a key that is not in memory, sorting after the disk tier's first entry (so
        that it cannot change the head of the buffer), is *staged*: kept in a staging area
        until :attr:`STAGE_LIMIT` such puts are resolved against the disk tier with one
        batched lookup, or until something needs the disk tier as it is (an eviction that
        reaches it, a lookup, a count). Without byte accounting only: a size needs the
        spilled record.

        Runtime complexity: O(1) for a key in memory or staged, O(log m) for a new one in
        memory (m entries); a staged put's share of a batched read, then one write (two for
        a new key); unstaged, one read and one or two writes.

        :raises TypeError: if the key serializer gives anything but bytes.
        :raises Exception: whatever the codec raises for a value it cannot write, before
            anything of that entry is written: the put is not applied, or the entry that
            could not move to disk stays in memory (over the bound). A staged put's key is
            encoded when its batch is resolved, so a key the codec cannot write (a type no
            key before it had: the first spill wrote one) fails the call that resolves it.
        """
        key_bytes = self._key_ser(key)
        if type(key_bytes) is not bytes:
            key_bytes = serialized_key(self._key_ser, key)  # converted, or TypeError
        entry = self._memory.get(key_bytes)
        if entry is not None:
            if self._track_bytes:  # sized first: a serializer error leaves the entry as it was
                size = self._size_of(key_bytes, entry.prior, old, new, context)
                self._memory_bytes += size - entry.size
                entry.size = size
            image = self._image
            if image is not None:
                image.add(key_bytes)
            entry.new = new
            entry.old = old
            entry.context = context
            if self._bytes_limit is not None and self._memory_bytes > self._bytes_limit:
                self._spill_tail()
            return
        if self._disk_count:
            staged = self._staged
            put = staged.get(key_bytes)
            if put is not None:
                staged[key_bytes] = put._replace(latest=self._codec.latest(new, old, context))
                return
            if self._stage:
                order = order_key(time, key_bytes)
                if order >= self._disk_head:  # type: ignore[operator]
                    staged[key_bytes] = _Staged(time, key, old,
                                                self._codec.latest(new, old, context), order)
                    if len(staged) >= self.STAGE_LIMIT:
                        self._flush()
                    return
            disk_key = self._disk_key(time, key_bytes)
            record = self._get(disk_key)  # type: ignore[misc]
            if record is not None:
                self._update_on_disk(disk_key, key_bytes, record, new, old, context)
                return
        entry = BufferedEntry(time, key_bytes, key, new, old, old, context)
        if self._track_bytes:
            entry.size = self._size_of(key_bytes, old, old, new, context)
        head = self._disk_head
        if head is not None:
            order = order_key(time, key_bytes)
            if order > head:
                self._write_new(time, key_bytes, entry.size, self._record(entry), order)
                return
        self._memory[key_bytes] = entry
        self._order.add((time, key_bytes))
        self._memory_bytes += entry.size
        image = self._image
        if image is not None:
            image.add(key_bytes)
        if time < self._min:
            self._min = time
        if self._over():
            self._spill_tail()

    def _flush(self) -> None:
        """Resolve every staged put against the disk tier: one batched lookup, then writes.

        A staged key found on disk gets its latest change; any other is a new entry, at
        its staged time with its staged prior, written to disk (it sorts after the disk
        tier's first entry). Each leaves the staging area once written; the latest change
        was encoded when it was staged.

        Runtime complexity: O(s log s) for s staged puts, one batched read, s to 2s writes.
        """
        staged = self._staged
        if not staged:
            return
        if self._keyed:
            keys = sorted((put.order, key_bytes) for key_bytes, put in staged.items())
        else:
            keys = [(ENTRY_PREFIX + key_bytes, key_bytes) for key_bytes in sorted(staged)]
        records = self._store.multi_get([k for k, _ in keys])  # type: ignore[union-attr]
        codec = self._codec
        for (key, key_bytes), record in zip(keys, records, strict=True):
            time, key_object, prior, latest, order = staged[key_bytes]
            if record is None:
                self._write_new(time, key_bytes, 0,
                                codec.assemble(time, key_object, prior, None, 0, latest), order)
            else:
                self._put(key, codec.updated(record, latest, None))  # type: ignore[misc]
                self._wrote(1)
            del staged[key_bytes]

    def _disk_key(self, time: int, key_bytes: bytes) -> bytes:
        """Where the record of a key (buffered at ``time``) is on disk."""
        return order_key(time, key_bytes) if self._keyed else ENTRY_PREFIX + key_bytes

    def _update_on_disk(self, disk_key: bytes, key_bytes: bytes, record: bytes, new: Any,
                        old: Any, context: RecordContext) -> None:
        """Rewrite a spilled entry's record with its latest change (the rest is copied)."""
        codec = self._codec
        if self._track_bytes:
            previous = record_size(record)
            size = entry_size(key_bytes, codec.prior_bytes(record), self._bytes_of(old),
                              self._bytes_of(new), context_size(context))
            record = codec.updated(record, codec.latest(new, old, context), size)
            self._disk_bytes += size - previous
        else:
            record = codec.updated(record, codec.latest(new, old, context), None)
        self._put(disk_key, record)  # type: ignore[misc]
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
        memory, order, image = self._memory, self._order, self._image
        while memory and self._over():
            entry = memory[order[-1][1]]
            record = self._record(entry)
            order.pop()
            del memory[entry.key_bytes]
            if image is not None:
                image.add(entry.key_bytes)
            self._memory_bytes -= entry.size
            self._write_new(entry.time, entry.key_bytes, entry.size, record)
        self._reset_min()

    def _record(self, entry: BufferedEntry) -> bytes:
        """The disk record of ``entry``."""
        prior_bytes = self._bytes_of(entry.prior) if self._track_bytes else None
        return self._codec.record(entry, prior_bytes)

    def _write_new(self, time: int, key_bytes: bytes, size: int, record: bytes,
                   order: bytes | None = None) -> None:
        """Write an entry (in neither tier), encoded as ``record``, to the disk tier.

        ``order``: its order key, if the caller has it.
        """
        store = self._open()
        if order is None:
            order = order_key(time, key_bytes)
        if self._keyed:
            store.put(order, record)
        else:
            store.put(ENTRY_PREFIX + key_bytes, record)
            store.put(order, b"")
        self._disk_count += 1
        self._disk_bytes += size
        head = self._disk_head
        if head is None or order < head:
            self._disk_head = order
            if not self._memory:
                self._min = time
        self._wrote(1 if self._keyed else 2)

    def _open(self) -> OrderedByteStore:
        """The store, opened at the first call."""
        store = self._store
        if store is None:
            store = self._store = self._backend.open_store()
            self._get = store.get
            self._put = store.put
        return store

    def _refill(self) -> None:
        """Move the disk tier's first entries up to the (empty) memory tier, while they fit.

        Runtime complexity: O(k log k) for k entries moved, plus one range scan and a batched
        read per :attr:`REFILL_BATCH` entries.
        """
        assert not self._memory
        records_limit, bytes_limit = self._records_limit, self._bytes_limit
        memory, codec = self._memory, self._codec
        reader = self._reader()
        moved: list[tuple[int, bytes]] = []
        try:
            while (head := reader.head) is not None:
                if records_limit is not None and len(moved) >= records_limit:
                    break
                order, record = head
                size = record_size(record)
                if bytes_limit is not None and self._memory_bytes + size > bytes_limit:
                    break
                entry = codec.entry(order[_SKIP:], record)
                memory[entry.key_bytes] = entry
                moved.append((entry.time, entry.key_bytes))
                self._memory_bytes += size
                self._remove_from_disk(order, size)
                self._disk_head = reader.advance()
        finally:
            self._order.update(moved)
            if self._image is not None:
                self._image.update(key_bytes for _, key_bytes in moved)
            self._reset_min()

    def _reader(self) -> _DiskReader:
        """A reader of the disk tier from its head (valid until the next put)."""
        self._flush()
        store = self._store
        assert store is not None and self._disk_head is not None
        return _DiskReader(store, self._disk_head, self.REFILL_BATCH, self._keyed)

    def _remove_from_disk(self, order: bytes, size: int) -> None:
        """Delete a disk entry (the caller fixes the disk head)."""
        store = self._store
        assert store is not None
        store.delete(order)
        if not self._keyed:
            store.delete(ENTRY_PREFIX + order[_SKIP:])
        self._disk_count -= 1
        self._disk_bytes -= size
        self._wrote(1 if self._keyed else 2)

    def _wrote(self, n: int) -> None:
        """Count ``n`` store writes; commit once :attr:`COMMIT_EVERY` are pending."""
        self._writes += n
        if self._writes >= self.COMMIT_EVERY:
            self._writes = 0
            self._backend.commit()

    def _reset_min(self) -> None:
        """Recompute the smallest buffer time: the memory tier's head, else the disk's."""
        order = self._order
        if order:
            self._min = order[0][0]
        else:
            head = self._disk_head
            self._min = LONG_MAX if head is None else time_of_order(head)

    # -- restarts ----------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write into the store what a restart needs of this buffer beyond its disk tier.

        That is the memory tier's entries changed since the last checkpoint (every one at
        the first), ``b"m" + key bytes -> record``, the image of a key that left memory
        deleted, and the disk tier's count and bytes; staged puts are resolved first. The
        writes are pending in the store: its owner commits them with the rest of its state,
        and the store then holds the whole buffer, each entry once (the memory image and the
        disk tier hold different keys). From the first checkpoint on, the buffer notes the
        keys whose memory-tier entry changes.

        Runtime complexity: O(d) encodings and writes for the d keys whose memory-tier entry
        changed since the last checkpoint (the m entries of the memory tier at the first).

        :raises Exception: whatever the codec raises for an entry it cannot write: the
            checkpoint is incomplete (its writes are not to be committed), and the next one
            writes again everything this one had to.
        """
        self._flush()
        store = self._open()
        memory = self._memory
        image = self._image
        for key_bytes in (memory if image is None else image):
            entry = memory.get(key_bytes)
            if entry is None:
                store.delete(MEMORY_PREFIX + key_bytes)
            else:
                store.put(MEMORY_PREFIX + key_bytes, self._record(entry))
        store.put(STATS_KEY, pack_stats(self._flags(), self._disk_count, self._disk_bytes))
        self._image = set()

    def restore(self) -> None:
        """Take back the buffer that the store holds as of its last (committed) checkpoint.

        For a new buffer, before anything else. Reads the memory tier's image (no more than
        the memory tier held) and the disk tier's figures and head; the disk tier stays on
        disk, its entries read in order, in batches, as eviction reaches them. A memory tier
        over this buffer's bounds (smaller than they were) sends its newest entries down to
        disk; an empty one is filled from the disk's head, as after an eviction. An empty
        store is an empty buffer. Records with sizes keep them: the buffer then tracks bytes.

        Runtime complexity: O(m log m) for the m entries of the memory image, plus two seeks.
        A store without figures (never checkpointed) is counted by one scan of its disk tier,
        in O(1) memory.

        :raises SpillFormatError: for a store of the other layout (buffer times a function of
            the key, or not), records without sizes for a buffer that tracks bytes, or
            records this version did not write.
        """
        assert not self._memory and not self._staged and self._store is None, \
            "restore is for a new buffer"
        store = self._open()
        stats = store.get(STATS_KEY)
        if stats is None:
            count, size = self._count_disk()
            sized = False  # the memory image's sizes, if any, are recomputed
        else:
            flags, count, size = unpack_stats(stats)
            if bool(flags & KEYED) != self._keyed:
                raise SpillFormatError(
                    "the spill store was written by a buffer whose buffer times "
                    f"{'were' if flags & KEYED else 'were not'} a function of the key, and "
                    f"this one's {'are' if self._keyed else 'are not'}: another suppression")
            sized = bool(flags & TRACKED)
            if sized:
                self._track_bytes, self._stage = True, False  # the sizes are there: kept
            elif self._track_bytes and count:
                raise SpillFormatError(
                    "the spill store holds entries without sizes, and this buffer tracks bytes "
                    "(a max_bytes bound, or debug metrics, that the buffer did not have when it "
                    "was written)")
        self._disk_count, self._disk_bytes = count, size
        first = next(store.items(ORDER_START, ORDER_END), None)
        self._disk_head = None if first is None else first[0]
        memory, codec = self._memory, self._codec
        resized: set[bytes] = set()  # entries whose image has another size: rewritten
        for key, record in store.items(MEMORY_PREFIX, MEMORY_END):
            entry = codec.entry(key[1:], record)
            if not self._track_bytes or not sized:
                entry_size = self._entry_size(entry) if self._track_bytes else 0
                if entry_size != entry.size:
                    entry.size = entry_size
                    resized.add(entry.key_bytes)
            memory[entry.key_bytes] = entry
            self._memory_bytes += entry.size
        self._order.update((entry.time, key_bytes) for key_bytes, entry in memory.items())
        self._image = resized
        self._reset_min()
        if self._over():
            self._spill_tail()
        elif not memory and self._disk_count:
            self._refill()

    def _flags(self) -> int:
        """The layout flags of this buffer's stats (see :func:`~.spill_record.pack_stats`)."""
        return (KEYED if self._keyed else 0) | (TRACKED if self._track_bytes else 0)

    def _count_disk(self) -> tuple[int, int]:
        """The disk tier's count and bytes, by one scan (O(1) memory).

        Only when its records carry sizes: otherwise the bytes of an untracked buffer.
        """
        store = self._store
        assert store is not None
        area = (store.items(ORDER_START, ORDER_END) if self._keyed
                else store.items(ENTRY_PREFIX, ENTRY_END))
        count = size = 0
        for _key, record in area:
            count += 1
            size += record_size(record)
        if size and not self._track_bytes:
            self._track_bytes, self._stage = True, False
        elif self._track_bytes and count and not size:
            raise SpillFormatError("the spill store holds entries without sizes, and this "
                                   "buffer tracks bytes")
        return count, size

    # -- removing ----------------------------------------------------------------------------

    def _evict_memory_head(self, callback: EvictCallback) -> None:
        """Hand the memory tier's head to ``callback``, then remove it (kept if it raises)."""
        order = self._order
        entry = self._memory[order[0][1]]
        callback(entry)
        order.pop(0)
        del self._memory[entry.key_bytes]
        if self._image is not None:
            self._image.add(entry.key_bytes)
        self._memory_bytes -= entry.size
        self._reset_min()

    def _evict_disk_head(self, reader: _DiskReader, callback: EvictCallback) -> None:
        """Hand the disk tier's head to ``callback``, then remove it (kept if it raises).

        For an empty memory tier only: the disk's head is then the buffer's.
        """
        head = reader.head
        assert head is not None and head[0] == self._disk_head, "reader out of step"
        order, record = head
        entry = self._codec.entry(order[_SKIP:], record)
        callback(entry)
        self._remove_from_disk(order, entry.size)
        self._disk_head = reader.advance()
        self._reset_min()

    def evict_while(self, predicate: Callable[[], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while the buffer is not empty and ``predicate()``.

        ``callback(entry)`` runs *before* the entry is removed, so inside it
        ``num_records``, ``size_bytes`` and ``min_time`` still include the entry. If the
        callback raises, the entry stays buffered. Once the memory tier is empty, entries
        are read from disk in batches and evicted from there; afterwards an empty memory
        tier is filled up from disk.

        Runtime complexity: O(log m) per entry from memory; per entry from disk, its decoding
        plus a share of a range scan and a batched read.

        :return: the number of evicted entries.
        """
        evicted = 0
        reader: _DiskReader | None = None
        try:
            while (self._memory or self._disk_count) and predicate():
                if self._memory:
                    self._evict_memory_head(callback)
                else:  # stays empty: only a put adds to memory
                    if reader is None:
                        reader = self._reader()
                    self._evict_disk_head(reader, callback)
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
        self._flush()
        time = 0 if self._time_of is None else self._time_of(key)
        record = self._get(self._disk_key(time, key_bytes))  # type: ignore[misc]
        return None if record is None else self._codec.entry(key_bytes, record)

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return self.num_records

    def __iter__(self) -> Iterator[BufferedEntry]:
        """Entries in eviction order: the memory tier's, then the disk tier's.

        Runtime complexity: O(n), reading the whole disk tier.
        """
        memory = self._memory
        self._flush()
        for _time, key_bytes in list(self._order):
            yield memory[key_bytes]
        if self._disk_count:
            yield from self._disk_entries()

    def _disk_entries(self) -> Iterator[BufferedEntry]:
        store = self._store
        assert store is not None
        reader = _DiskReader(store, ORDER_START, self.REFILL_BATCH, self._keyed)
        entry = self._codec.entry
        while (head := reader.head) is not None:
            yield entry(head[0][_SKIP:], head[1])
            reader.advance()

    @property
    def num_records(self) -> int:
        """Number of distinct buffered keys, both tiers (staged puts resolved first)."""
        self._flush()
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
        return self._min

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
        """Entries in the disk tier (staged puts resolved first)."""
        self._flush()
        return self._disk_count

    @property
    def staged_records(self) -> int:
        """Puts in the staging area, waiting to be resolved against the disk tier."""
        return len(self._staged)

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (used by tests after each operation).

        The memory tier: index and order agree, within its bounds, sizes up to date. The
        disk tier: both areas hold the same keys, its count, bytes and head are right, and
        every record reads back. Together: no key in both, and memory a prefix of the order.
        (That memory holds the head whenever it can is a policy applied after evictions,
        not an invariant: an update can shrink a spilled entry.)
        """
        memory, order = self._memory, self._order
        order._check()
        assert len(order) == len(memory), "memory index and order disagree"
        for time, key_bytes in order:
            entry = memory[key_bytes]
            assert entry.time == time and entry.key_bytes == key_bytes, "stale order"
            assert entry.key_bytes == self._key_ser(entry.key), "stale key bytes"
        assert not self._over(), "memory tier over its bounds"
        head_time = order[0][0] if order else (
            LONG_MAX if self._disk_head is None else time_of_order(self._disk_head))
        assert self._min == head_time, "stale smallest buffer time"
        if self._track_bytes:
            assert self._memory_bytes == sum(e.size for e in memory.values()), "bytes drifted"
            for e in memory.values():
                assert e.size == self._entry_size(e), "stale entry size"
        else:
            assert self._memory_bytes == 0 and self._disk_bytes == 0
        staged = self._staged
        assert len(staged) < self.STAGE_LIMIT and (self._stage or not staged), "staging"
        assert not staged or self._disk_count, "staged puts with an empty disk tier"
        for key_bytes, put in staged.items():
            assert key_bytes not in memory and self._key_ser(put.key) == key_bytes, "staging"
            assert put.order == order_key(put.time, key_bytes), "stale staged order key"
        store = self._store
        if store is None:
            assert self._disk_count == 0 and self._disk_head is None
            return
        orders = [o for o, _ in store.items(ORDER_START, ORDER_END)]
        time_of = self._time_of
        tier = [k for k, _ in store.items()
                if not MEMORY_PREFIX <= k < MEMORY_END and k != STATS_KEY]
        if time_of is not None:
            records = {o[_SKIP:]: v for o, v in store.items(ORDER_START, ORDER_END)}
            assert tier == orders, "foreign keys in the store"
            for o in orders:
                key = self._codec.entry(o[_SKIP:], records[o[_SKIP:]]).key
                assert time_of(key) == time_of_order(o), "an entry not at its key's time"
        else:
            records = {k[1:]: v for k, v in store.items(ENTRY_PREFIX, ENTRY_END)}
            assert tier == sorted(
                [ENTRY_PREFIX + k for k in records] + orders), "foreign keys in the store"
        assert len(orders) == len(records) == self._disk_count, "disk count drifted"
        assert sorted(o[_SKIP:] for o in orders) == sorted(records), "disk areas disagree"
        assert self._disk_head == (orders[0] if orders else None), "stale disk head"
        assert not set(records) & set(memory), "a key in both tiers"
        if orders and order:
            last = order[-1]
            assert order_key(last[0], last[1]) < orders[0], "memory is not a prefix"
        disk_bytes = 0
        for o in orders:
            entry = self._codec.entry(o[_SKIP:], records[o[_SKIP:]])
            assert entry.time == time_of_order(o), "order key and record disagree on the time"
            assert entry.key_bytes == self._key_ser(entry.key), "stale spilled key bytes"
            disk_bytes += entry.size
            if self._track_bytes:
                assert entry.size == self._entry_size(entry), "stale spilled entry size"
        assert disk_bytes == self._disk_bytes, "disk bytes drifted"
        image = {k[1:]: v for k, v in store.items(MEMORY_PREFIX, MEMORY_END)}
        changed = self._image
        if changed is None:
            assert not image, "a memory image before the first checkpoint"
            return
        for key_bytes, entry in memory.items():  # the image is the memory tier, but changes
            if key_bytes not in changed:
                assert image.get(key_bytes) == self._record(entry), "stale memory image"
        assert set(image) <= set(memory) | changed, "an image of a key not in memory"


class _DiskReader:
    """The disk tier from a given order key on: ``(order key, record)`` pairs, read in batches.

    A view of the store when it was made; the owner deletes what it consumed and writes
    nothing else meanwhile.
    """

    __slots__ = ("_store", "_items", "_keyed", "_batch", "_size", "_position", "head")

    def __init__(self, store: OrderedByteStore, start: bytes, batch: int, keyed: bool) -> None:
        self._store = store
        self._items = store.items(start, ORDER_END)
        self._keyed = keyed  # the order area's values are the records
        self._size = batch
        self._batch: list[tuple[bytes, bytes]] = []
        self._position = 0
        self.head: tuple[bytes, bytes] | None = None
        """The current ``(order key, record)``; ``None`` past the end."""
        self.advance()

    def advance(self) -> bytes | None:
        """Move to the next entry; its order key (``None`` past the end).

        :raises SpillFormatError: if an order key has no record.
        """
        self._position += 1
        if self._position >= len(self._batch):
            batch = list(islice(self._items, self._size))
            if not self._keyed:
                records = self._store.multi_get(
                    [ENTRY_PREFIX + order[_SKIP:] for order, _ in batch])
                for i, record in enumerate(records):
                    if record is None:
                        raise SpillFormatError(
                            f"the spill store lost the entry of {batch[i][0]!r}")
                    batch[i] = (batch[i][0], record)
            self._batch, self._position = batch, 0
        if self._position < len(self._batch):
            self.head = self._batch[self._position]
            return self.head[0]
        self.head = None
        return None
