"""The time-ordered suppression buffer (in-memory tier).

Entries are ordered by ``(buffer time, serialized key bytes)``, bytes compared unsigned and
lexicographically (a shorter prefix first), exactly as Kafka's ``BufferKey``. Eviction always
takes the head of that order.

Layout (see docs/implementation.md): a dict ``key identity -> entry`` (the index) and an
:class:`~suppress.order.HeapOrder` holding the entries in eviction order (final results,
where thousands of keys share each buffer time, have a buffer of their own:
:class:`~suppress.final.FinalResultsBuffer`). A key is serialized once,
when it enters the buffer; updates to a buffered key are a dict lookup and never touch the
order. Entries leave only through the head. A key's identity is ``key_identity(key)`` when
one is given (the topology runtime gives one per key serializer, so that keys are the same
exactly when their bytes are), else the key's bytes.

Byte accounting (Kafka's size estimate per entry) is kept incrementally only when
``track_bytes`` is set (a ``max_bytes`` limit, or debug metrics); otherwise :attr:`size_bytes`
computes the same figure on demand.

Runtime complexity: put O(1) for a buffered key, O(log n) for a new one; ``min_time`` O(1);
evicting the head O(log n).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, Protocol

from .entry import BufferedEntry, RecordContext, context_size, entry_size
from .order import HeapOrder

__all__ = ("SuppressionBuffer", "TimeOrderedBuffer", "key_bytes_of", "serialized_key")

EvictCallback = Callable[[BufferedEntry], None]


def serialized_key(key_serializer: Callable[[Any], Any], key: Any) -> bytes:
    """``key``'s bytes from ``key_serializer``: its place in a suppression's order.

    :raises TypeError: if the serializer gives anything but bytes-like data (a suppression
        orders keys by their serialized bytes).
    """
    data = key_serializer(key)
    if type(data) is bytes:
        return data
    return key_bytes_of(data, key)


def identity_of_keys(key_serializer: Callable[[Any], Any],
                     key_identity: Callable[[Any], Hashable] | None) -> Callable[[Any], Hashable]:
    """``key_identity``, or where it is ``None`` a key's bytes (:func:`serialized_key`)."""
    if key_identity is not None:
        return key_identity
    return lambda key: serialized_key(key_serializer, key)


def key_bytes_of(data: Any, key: Any) -> bytes:
    """What the key serializer gave for ``key`` (``data``), as :func:`serialized_key` returns it.

    :raises TypeError: as :func:`serialized_key`.
    """
    if type(data) is bytes:
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"the key serializer gave {type(data).__name__} for key {key!r}; a "
                    "suppression orders keys by their serialized bytes, so it needs bytes")


class SuppressionBuffer(Protocol):
    """What the suppress processor needs from a buffer tier (memory now, spill later)."""

    def put(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """Buffer a change for ``key`` at ``time`` (kept if the key is already held)."""

    def evict_while(self, predicate: Callable[[], bool], callback: EvictCallback) -> int:
        """Pass head entries to ``callback`` (before removal) while ``predicate()`` holds."""

    def evict_over(self, records_limit: int | None, bytes_limit: int | None,
                   callback: EvictCallback) -> int:
        """Evict head entries while over ``records_limit`` or ``bytes_limit`` (strictly)."""

    def evict_due(self, is_due: Callable[[int], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while ``is_due(min_time)`` holds."""

    def prior_value(self, key: Any) -> tuple[bool, Any]:
        """``(True, prior)`` for a buffered key, ``(False, None)`` otherwise."""

    @property
    def num_records(self) -> int:
        """Number of distinct buffered keys."""

    @property
    def size_bytes(self) -> int:
        """Sum of the entries' sizes (Kafka's estimate)."""

    @property
    def min_time(self) -> int:
        """Smallest buffer time, or ``2**63 - 1`` when empty."""


class TimeOrderedBuffer:
    """In-memory buffer of the latest change per key, ordered by (buffer time, key bytes).

    :param key_serializer: gives a key's bytes (its place in the order, and its size).
    :param value_serializer: gives a value's bytes, for byte accounting.
    :param track_bytes: keep every entry's size up to date on each put (needed for
        ``max_bytes``); when false, :attr:`size_bytes` is computed on demand, O(n).
    :param key_identity: ``key -> identity``, equal exactly for keys with equal serialized
        bytes (a key is the same key as another when its bytes are); ``None``: the bytes
        themselves, one ``key_serializer`` call per put.

    >>> buf = TimeOrderedBuffer(str.encode, str.encode, track_bytes=True)
    >>> buf.put(0, "asdf", "23roni", None, RecordContext(0, 0, "topic"))
    >>> buf.size_bytes, buf.num_records, buf.min_time
    (43, 1, 0)
    >>> buf.evict_while(lambda: True, lambda e: print(e.key, e.new))
    asdf 23roni
    1
    """

    def __init__(
        self,
        key_serializer: Callable[[Any], bytes],
        value_serializer: Callable[[Any], bytes | None],
        track_bytes: bool = False,
        key_identity: Callable[[Any], Hashable] | None = None,
    ) -> None:
        self._key_ser = key_serializer
        self.key_identity = identity_of_keys(key_serializer, key_identity)
        self._identity_is_bytes = key_identity is None  # an entry's key bytes are its identity
        self.changed: dict[Hashable, Any] | None = None
        """With change tracking (a durable owner sets a dict): identity -> key of every entry
        put, updated or removed since the owner last cleared it; ``None``: not tracked."""
        self._value_ser = value_serializer
        self._track_bytes = track_bytes
        self._index: dict[Hashable, BufferedEntry] = {}
        self._order = HeapOrder()
        self._push = self._order.push
        self._min_time = self._order.min_time  # bound: the processor checks it per record
        self._bytes = 0

    # -- adding ------------------------------------------------------------------------------

    def put(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """Buffer ``Change(new, old)`` for ``key``.

        A key already buffered keeps its buffer time and prior value; its latest change and
        context (and size) are replaced. A new key is buffered at ``time`` with
        ``prior = old``.

        Runtime complexity: O(1) for a buffered key, else as :meth:`add`.
        """
        identity = self.key_identity(key)
        entry = self._index.get(identity)
        if entry is not None:
            if self._track_bytes:  # sized first: a serializer error leaves the entry as it was
                size = self._size_of(entry.key_bytes, entry.prior, old, new, context)
                self._bytes += size - entry.size
                entry.size = size
            entry.new = new
            entry.old = old
            entry.context = context
            if self.changed is not None:
                self.changed[identity] = key
            return
        self.add(time, key, new, old, context)

    def add(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """:meth:`put` for a key known not to be buffered: buffered at ``time``, prior ``old``.

        :raises TypeError: if the key serializer gives anything but bytes (the order of
            keys is the order of their bytes); nothing is buffered then.

        Runtime complexity: O(log n).
        """
        key_bytes = self._key_ser(key)
        if type(key_bytes) is not bytes:
            key_bytes = key_bytes_of(key_bytes, key)
        entry = BufferedEntry(time, key_bytes, key, new, old, old, context)
        if self._track_bytes:
            entry.size = self._size_of(key_bytes, old, old, new, context)
            self._bytes += entry.size
        identity = key_bytes if self._identity_is_bytes else self.key_identity(key)
        self._push(entry)  # bytes against bytes only: the push cannot fail half-way
        self._index[identity] = entry
        if self.changed is not None:
            self.changed[identity] = key

    def _size_of(self, key_bytes: bytes, prior: Any, old: Any, new: Any,
                 context: RecordContext) -> int:
        """Kafka's size of an entry holding these values (serialized here)."""
        ser = self._value_ser
        prior_b = None if prior is None else ser(prior)
        old_b = None if old is None else (prior_b if old is prior else ser(old))
        new_b = None if new is None else ser(new)
        return entry_size(key_bytes, prior_b, old_b, new_b, context_size(context))

    def _entry_size(self, entry: BufferedEntry) -> int:
        return self._size_of(entry.key_bytes, entry.prior, entry.old, entry.new, entry.context)

    # -- removing ----------------------------------------------------------------------------

    def evict_head(self, callback: EvictCallback) -> None:
        """Hand the head entry to ``callback``, then remove it (kept if the callback raises).

        The buffer must not be empty. Runtime complexity: as the order's ``evict_head``.
        """
        entry = self._order.evict_head(callback)
        identity = entry.key_bytes if self._identity_is_bytes else self.key_identity(entry.key)
        del self._index[identity]
        self._bytes -= entry.size
        if self.changed is not None:
            self.changed[identity] = entry.key

    _evict_head = evict_head  # internal callers keep this one (a subclass may override)

    def evict_while(self, predicate: Callable[[], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while the buffer is not empty and ``predicate()``.

        ``callback(entry)`` runs *before* the entry is removed, so inside it
        ``num_records``, ``size_bytes`` and ``min_time`` still include the entry. If the
        callback raises, the entry stays buffered.

        :return: the number of evicted entries.
        """
        index = self._index
        evicted = 0
        while index and predicate():
            self._evict_head(callback)
            evicted += 1
        return evicted

    def evict_over(self, records_limit: int | None, bytes_limit: int | None,
                   callback: EvictCallback) -> int:
        """Evict head entries while over a limit (``None``: no limit).

        Over means ``num_records > records_limit`` or ``size_bytes > bytes_limit``; a bytes
        limit needs ``track_bytes``.

        :return: the number of evicted entries.
        """
        if bytes_limit is not None and not self._track_bytes:
            raise ValueError("a bytes limit needs a buffer that tracks bytes")
        index = self._index
        evicted = 0
        while index and ((records_limit is not None and len(index) > records_limit)
                         or (bytes_limit is not None and self._bytes > bytes_limit)):
            self._evict_head(callback)
            evicted += 1
        return evicted

    def evict_due(self, is_due: Callable[[int], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while ``is_due(min_time)`` holds.

        ``is_due`` is the suppression's rule (:mod:`suppress.time`) applied to the head's
        buffer time (ms); it is never called on an empty buffer.

        :return: the number of evicted entries.
        """
        index = self._index
        min_time = self._min_time
        evicted = 0
        while index and is_due(min_time()):
            self._evict_head(callback)
            evicted += 1
        return evicted

    # -- looking up --------------------------------------------------------------------------

    def prior_value(self, key: Any) -> tuple[bool, Any]:
        """Return ``(True, prior)`` for a buffered key, else ``(False, None)``.

        ``prior`` is the value downstream last saw for the key (possibly ``None``); a
        suppressed table's lookups (joins) read it for buffered keys.
        """
        entry = self.get(key)
        if entry is None:
            return False, None
        return True, entry.prior

    def get(self, key: Any) -> BufferedEntry | None:
        """The buffered entry of ``key`` (or of a key with its identity), or ``None``."""
        return self._index.get(self.key_identity(key))

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[BufferedEntry]:
        """Entries in eviction order. Runtime complexity: O(n log n)."""
        return iter(self._order)

    @property
    def num_records(self) -> int:
        """Number of distinct buffered keys."""
        return len(self._index)

    @property
    def size_bytes(self) -> int:
        """Sum of the buffered entries' sizes in bytes (Kafka's estimate).

        Runtime complexity: O(1) with ``track_bytes``, else O(n) (computed on demand).
        """
        if self._track_bytes:
            return self._bytes
        return sum(self._entry_size(e) for e in self._index.values())

    @property
    def min_time(self) -> int:
        """Smallest buffer time (ms), or ``2**63 - 1`` when the buffer is empty."""
        return self._order.min_time()

    @property
    def tracks_bytes(self) -> bool:
        """Whether entry sizes are kept up to date on every put."""
        return self._track_bytes

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (used by tests after each operation)."""
        order = self._order
        order._check()
        ordered = list(order)
        assert len(ordered) == len(order) == len(self._index), "index and order disagree"
        for entry in ordered:
            assert self.get(entry.key) is entry, "index points to a stale entry"
            assert entry.key_bytes == self._key_ser(entry.key), "stale key bytes"
        if self._track_bytes:
            assert self._bytes == sum(e.size for e in ordered), "byte total drifted"
            for e in ordered:
                assert e.size == self._entry_size(e), "stale entry size"
        else:
            assert self._bytes == 0 and all(e.size == 0 for e in ordered)
