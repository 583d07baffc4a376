"""The final-results buffer: a bucket of plain-tuple entries per buffer time.

(Sliding and session windows, which nearly all end at a time of their own, are buffered in
one heap instead: :class:`~suppress.final_heap.FinalResultsHeap`. What both layouts share,
entries and their sizes, lookups, views and eviction one entry at a time, is
:class:`FinalEntries`.)

``until_window_closes`` holds the latest change of each window until the window closes.
Thousands of keys share a window's end, and a closed window leaves whole, so the buffer keeps
a bucket per buffer time (a dict by key identity, in buffering order) and a heap of the
distinct times. A bucket is sorted by key bytes when it reaches the head; entries with equal
bytes keep their buffering order. That is Kafka's order, ``(buffer time, key bytes)``, as in
:class:`~suppress.buffer.TimeOrderedBuffer`, which buffers time limits.

Entries are plain tuples, replaced on update. The garbage collector stops tracking a tuple of
plain values, where it scans an object per entry (or a named tuple) at every full collection:
with tens of thousands of live windows, that scanning cost up to 2 µs per record. For the
same reason an entry of a record piped without headers keeps the context's offset and topic
rather than a context object, and the key that leaves is built when it leaves.

**Keys.** An entry holds a *part* of its key, and its bucket builds the key from the part.
Without :class:`WindowKeys`, the part is the key. With them (time windows: one window per
buffer time), the part is the key inside the window, so that a windowed aggregation can hand
its updates over with :meth:`FinalResultsBuffer.write` without building a windowed key per
update; a key that :meth:`WindowKeys.split` keeps whole (windows whose end was capped at the
largest timestamp share that buffer time) is kept whole in a bucket of whole keys. A key is
the same key as another exactly when their identities are (see
:class:`~suppress.buffer.TimeOrderedBuffer`); within a bucket of time windows, the identity of
the part.

The suppression engine replaces an entry in place on its hot path
(:meth:`~suppress.processor.SuppressProcessor.window_entry`), keeping the fields named by
:data:`PRIOR`, :data:`KEY_BYTES` and :data:`PART`, and reads the buckets, the heap of times,
the count and the byte total in place; every other write goes through
:meth:`FinalResultsBuffer.write`.

Entry fields: ``(new, timestamp, old, context, prior, topic, key bytes, part)``, plus
``(size, prior bytes, new bytes, fixed size)`` when bytes are tracked; the fixed size is the
part of :func:`~suppress.entry.entry_size` that an update does not change (8 + key bytes +
prior bytes). ``topic`` is ``None`` when
``context`` is a :class:`~suppress.entry.RecordContext`; otherwise ``context`` is the offset of
a record without headers from ``topic``, on partition 0. The context that leaves carries the
entry's timestamp (the aggregate's: the latest of its records).

Runtime complexity: a write O(1) (a new buffer time O(log t)); evicting a closed bucket of k
entries O(k log k).
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

from .buffer import identity_of_keys, key_bytes_of
from .entry import BufferedEntry, RecordContext, change_size, context_size, entry_size
from .errors import LONG_MAX

__all__ = ("BucketKeys", "FinalEntries", "FinalResultsBuffer", "WindowKeys")

_NEW, _TS, _OLD, _CTX, _PRIOR, _TOPIC, _KEY_BYTES, _PART = range(8)
PRIOR, KEY_BYTES, PART = _PRIOR, _KEY_BYTES, _PART
"""The fields an update in place keeps (without byte tracking; see the module docstring)."""
_SIZE, _PRIOR_BYTES, _NEW_BYTES, _FIXED = 8, 9, 10, 11  # with byte tracking
_new_tuple = tuple.__new__  # a RecordContext of values known to be valid

EmitChange = Callable[[Any, Any, Any, RecordContext], None]
"""``emit(key, new, old, context)``: an entry leaving the buffer."""


class BucketKeys(NamedTuple):
    """How the keys of one window are built, serialized and identified from their parts."""

    key_of: Callable[[Any], Any]
    """``part -> key`` (the windowed key)."""
    key_bytes: Callable[[Any], Any]
    """``part -> the key's bytes`` (the key serializer's result)."""
    identity: Callable[[Any], Hashable]
    """``part -> identity``: equal exactly for parts whose keys have equal bytes."""


class WindowKeys(Protocol):
    """Keys made of a window and a part, one window per buffer time (time windows)."""

    def split(self, key: Any) -> tuple[Hashable, Any]:
        """``(window, part)`` of ``key``; ``(None, key)`` for a key kept whole."""
        ...

    def bucket_keys(self, window: Any) -> BucketKeys:
        """How the keys of ``window`` are built, serialized and identified."""
        ...


class _Bucket:
    """The entries of one buffer time: ``identity -> entry``, and how their keys are built."""

    __slots__ = ("entries", "window", "keys", "run")

    def __init__(self, window: Any, keys: BucketKeys | None) -> None:
        self.entries: dict[Hashable, tuple[Any, ...]] = {}
        self.window = window  # with WindowKeys; else None
        self.keys = keys  # None: the part is the key
        self.run: list[Hashable] | None = None
        """The identities sorted by key bytes, descending (the head pops from the end);
        ``None`` until the bucket is evicted one entry at a time, and after a new entry."""


def _context(entry: tuple[Any, ...]) -> RecordContext:
    """The context an entry leaves with: its latest record's, at the entry's timestamp."""
    topic = entry[_TOPIC]
    if topic is not None:
        context: RecordContext = _new_tuple(RecordContext, (entry[_TS], entry[_CTX], topic, 0,
                                                             ()))
        return context
    ctx: RecordContext = entry[_CTX]
    return ctx if ctx[0] == entry[_TS] else ctx.with_timestamp(entry[_TS])


class FinalEntries(ABC):
    """What both final-results layouts share: entries, their sizes, lookups and eviction.

    A layout (:class:`FinalResultsBuffer`, :class:`~suppress.final_heap.FinalResultsHeap`)
    keeps the entries in its order and gives :meth:`_find`, :meth:`_evict_head`,
    :meth:`_min_time`, :meth:`_entries` and :meth:`emit_closed`; everything else is here.
    """

    def __init__(self, key_serializer: Callable[[Any], bytes],
                 value_serializer: Callable[[Any], bytes | None], track_bytes: bool,
                 key_identity: Callable[[Any], Hashable] | None) -> None:
        self.key_identity = identity_of_keys(key_serializer, key_identity)
        self._whole_keys = BucketKeys(lambda key: key, key_serializer, self.key_identity)
        self._value_ser = value_serializer
        self._track_bytes = track_bytes
        self._count = 0
        self._bytes = 0  # kept only when tracking bytes
        self._topic_sizes: dict[str, int] = {}
        self._last_topic: str | None = None  # the topic last sized, and its context's size
        self._last_topic_size = 0
        self.changed: dict[Hashable, Any] | None = None
        """With change tracking (a durable owner sets a dict): a key of the layout's choosing
        -> key of every entry written or removed since the owner last cleared it; ``None``:
        not tracked."""

    # -- the layout's part -----------------------------------------------------------------------

    @abstractmethod
    def _find(self, key: Any) -> tuple[int, Any, tuple[Any, ...]] | None:
        """``(time, key, entry)`` of a buffered key, or ``None``."""

    @abstractmethod
    def _evict_head(self, callback: Callable[[BufferedEntry], object]) -> None:
        """Hand the head entry's view to ``callback``, then remove it (kept if it raises)."""

    @abstractmethod
    def _min_time(self) -> int:
        """The smallest buffer time (ms), or ``2**63 - 1`` when empty."""

    @abstractmethod
    def _entries(self) -> Iterable[tuple[Any, ...]]:
        """Every entry, in no particular order."""

    @abstractmethod
    def write(self, time: int, window: Any, part: Any, identity: Hashable, new: Any, old: Any,
              timestamp: int, context: Any, topic: str | None) -> None:
        """Buffer a change of the key given as ``part`` (of ``window``) with its identity."""

    @abstractmethod
    def emit_closed(self, last_end: int, emit: EmitChange) -> int:
        """Hand every entry with buffer time <= ``last_end`` (ms) to ``emit``, in order."""

    # -- entries -----------------------------------------------------------------------------

    def _new_entry(self, keys: BucketKeys, part: Any, new: Any, timestamp: int, old: Any,
                   context: Any, topic: str | None) -> tuple[Any, ...]:
        """A new entry of the key of ``part`` (its prior is ``old``), sized when tracked.

        :raises TypeError: if the key serializer gives anything but bytes.
        """
        data = keys.key_bytes(part)
        key_bytes = data if type(data) is bytes else key_bytes_of(data, keys.key_of(part))
        if self._track_bytes:
            return self._sized(key_bytes, part, new, timestamp, old, context, topic)
        return (new, timestamp, old, context, old, topic, key_bytes, part)

    def updated(self, entry: tuple[Any, ...], new: Any, timestamp: int, old: Any, context: Any,
                topic: str | None) -> tuple[Any, ...]:
        """``entry`` after an update: prior and key kept, resized when tracked."""
        if self._track_bytes:
            return self.resized(entry, new, timestamp, old, context, topic)
        return (new, timestamp, old, context, entry[_PRIOR], topic, entry[_KEY_BYTES],
                entry[_PART])

    def _sized(self, key_bytes: bytes, part: Any, new: Any, timestamp: int, old: Any,
               context: Any, topic: str | None) -> tuple[Any, ...]:
        """A new entry (its prior is ``old``) with its size, added to the total.

        Values are serialized before the total changes: an error leaves everything as it was.
        """
        ser = self._value_ser
        prior_bytes = None if old is None else ser(old)
        new_bytes = None if new is None else ser(new)
        fixed = entry_size(key_bytes, prior_bytes, None, None, 0)
        size = fixed + self._context_size(context, topic) + change_size(prior_bytes, prior_bytes,
                                                                         new_bytes)
        self._bytes += size
        return (new, timestamp, old, context, old, topic, key_bytes, part, size, prior_bytes,
                new_bytes, fixed)

    def resized(self, entry: tuple[Any, ...], new: Any, timestamp: int, old: Any, context: Any,
                topic: str | None) -> tuple[Any, ...]:
        """``entry`` after an update, with its size; the total adjusted (bytes tracked).

        The old value is usually the entry's latest, whose bytes are kept. Values are
        serialized before the total changes: an error leaves everything as it was.
        """
        ser = self._value_ser
        old_bytes = (entry[_NEW_BYTES] if old is entry[_NEW]
                     else None if old is None else ser(old))
        new_bytes = None if new is None else ser(new)
        if topic is not None and topic is self._last_topic:
            context_bytes = self._last_topic_size
        else:
            context_bytes = self._context_size(context, topic)
        prior_bytes = entry[_PRIOR_BYTES]
        size = entry[_FIXED] + context_bytes + change_size(prior_bytes, old_bytes, new_bytes)
        self._bytes += size - entry[_SIZE]
        return (new, timestamp, old, context, entry[_PRIOR], topic, entry[_KEY_BYTES],
                entry[_PART], size, prior_bytes, new_bytes, entry[_FIXED])

    def _context_size(self, context: Any, topic: str | None) -> int:
        """``context_size`` of an entry's context, kept per topic for records without headers."""
        if topic is None:
            if context[4]:
                return context_size(context)
            topic = context[2]
        size = self._topic_sizes.get(topic)
        if size is None:
            size = self._topic_sizes[topic] = context_size(RecordContext(0, 0, topic))
        self._last_topic, self._last_topic_size = topic, size
        return size

    def _check_entry(self, entry: tuple[Any, ...], key_bytes: Callable[[Any], Any]) -> int:
        """Assert one entry's invariants (``key_bytes``: its part's bytes); its size."""
        data = key_bytes(entry[_PART])
        assert entry[_KEY_BYTES] == key_bytes_of(data, entry[_PART]), "stale key bytes"
        if not self._track_bytes:
            assert len(entry) == 8
            return 0
        assert len(entry) == 12
        assert entry[_FIXED] == entry_size(entry[_KEY_BYTES], entry[_PRIOR_BYTES], None, None,
                                           0), "stale fixed size"
        size: int = entry[_SIZE]
        return size

    # -- removing ----------------------------------------------------------------------------

    def evict_while(self, predicate: Callable[[], bool],
                    callback: Callable[[BufferedEntry], object]) -> int:
        """Evict head entries while the buffer is not empty and ``predicate()`` holds.

        The buffer's protocol (:class:`~suppress.buffer.SuppressionBuffer`), one entry at a
        time: final results leave through ``emit_closed``, all closed windows at once.

        ``callback(entry)`` runs before the entry is removed; if it raises, the entry stays.

        :return: the number of evicted entries.
        """
        evicted = 0
        while self._count and predicate():
            self._evict_head(callback)
            evicted += 1
        return evicted

    def evict_over(self, records_limit: int | None, bytes_limit: int | None,
                   callback: Callable[[BufferedEntry], object]) -> int:
        """Evict head entries while over a limit (``None``: no limit).

        :raises ValueError: for a bytes limit without byte tracking.
        :return: the number of evicted entries.
        """
        if bytes_limit is not None and not self._track_bytes:
            raise ValueError("a bytes limit needs a buffer that tracks bytes")
        return self.evict_while(
            lambda: ((records_limit is not None and self._count > records_limit)
                     or (bytes_limit is not None and self._bytes > bytes_limit)), callback)

    def evict_due(self, is_due: Callable[[int], bool],
                  callback: Callable[[BufferedEntry], object]) -> int:
        """Evict head entries, in order, while ``is_due(min_time)`` holds.

        :return: the number of evicted entries.
        """
        return self.evict_while(lambda: is_due(self._min_time()), callback)

    # -- looking up --------------------------------------------------------------------------

    def get(self, key: Any) -> BufferedEntry | None:
        """A view of the buffered entry of ``key`` (or of a key with its identity), or ``None``."""
        found = self._find(key)
        return None if found is None else self._view(*found)

    def prior_value(self, key: Any) -> tuple[bool, Any]:
        """``(True, prior)`` for a buffered key, ``(False, None)`` otherwise."""
        found = self._find(key)
        return (False, None) if found is None else (True, found[2][_PRIOR])

    def _view(self, time: int, key: Any, entry: tuple[Any, ...]) -> BufferedEntry:
        view = BufferedEntry(time, entry[_KEY_BYTES], key, entry[_NEW], entry[_OLD],
                             entry[_PRIOR], _context(entry))
        if self._track_bytes:
            view.size = entry[_SIZE]
        return view

    def __contains__(self, key: object) -> bool:
        return self._find(key) is not None

    def __len__(self) -> int:
        return self._count

    @property
    def num_records(self) -> int:
        """Number of buffered entries."""
        return self._count

    @property
    def size_bytes(self) -> int:
        """Sum of the buffered entries' sizes in bytes (Kafka's estimate).

        Runtime complexity: O(1) with ``track_bytes``, else O(n) (computed on demand).
        """
        if self._track_bytes:
            return self._bytes
        ser = self._value_ser
        total = 0
        for entry in self._entries():
            prior, old, new = entry[_PRIOR], entry[_OLD], entry[_NEW]
            prior_bytes = None if prior is None else ser(prior)
            old_bytes = prior_bytes if old is prior else None if old is None else ser(old)
            total += entry_size(entry[_KEY_BYTES], prior_bytes, old_bytes,
                                None if new is None else ser(new),
                                self._context_size(entry[_CTX], entry[_TOPIC]))
        return total

    @property
    def min_time(self) -> int:
        """Smallest buffer time (ms), or ``2**63 - 1`` when the buffer is empty."""
        return self._min_time()

    @property
    def tracks_bytes(self) -> bool:
        """Whether entry sizes are kept up to date on every write."""
        return self._track_bytes


class FinalResultsBuffer(FinalEntries):
    """In-memory buffer of the latest change per windowed key, a bucket per buffer time.

    It is a :class:`~suppress.buffer.SuppressionBuffer`; its eviction callbacks get
    :class:`~suppress.entry.BufferedEntry` views built on demand, and :meth:`emit_closed`
    hands closed windows on without them.

    :param key_serializer: gives a key's bytes (its place in the order, and its size).
    :param value_serializer: gives a value's bytes, for byte accounting.
    :param track_bytes: keep every entry's size up to date on each write (needed for
        ``max_bytes``); when false, :attr:`size_bytes` is computed on demand, O(n).
    :param key_identity: ``key -> identity`` (see :class:`~suppress.buffer.TimeOrderedBuffer`);
        ``None``: the key's bytes.
    :param window_keys: keys are a window and a part, one window per buffer time (module
        docstring); ``None``: keys are kept whole.
    :param time_of: ``key -> buffer time``, for lookups by key (:meth:`get`); ``None``: a
        lookup searches every buffer time.

    With change tracking, :attr:`changed` is keyed by ``(time, identity)``.

    >>> buf = FinalResultsBuffer(str.encode, str.encode)
    >>> buf.put(10, "b", 2, None, RecordContext(5, 0, "t"))
    >>> buf.put(10, "a", 1, None, RecordContext(4, 1, "t"))
    >>> buf.emit_closed(10, lambda key, new, old, ctx: print(key, new, ctx.timestamp))
    a 1 4
    b 2 5
    2
    """

    def __init__(
        self,
        key_serializer: Callable[[Any], bytes],
        value_serializer: Callable[[Any], bytes | None],
        track_bytes: bool = False,
        key_identity: Callable[[Any], Hashable] | None = None,
        window_keys: WindowKeys | None = None,
        time_of: Callable[[Any], int] | None = None,
    ) -> None:
        super().__init__(key_serializer, value_serializer, track_bytes, key_identity)
        self._time_of = time_of
        self._window_keys = window_keys
        self._buckets: dict[int, _Bucket] = {}
        self._times: list[int] = []  # heap of the buckets' times

    # -- adding ------------------------------------------------------------------------------

    def put(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """Buffer ``Change(new, old)`` for ``key`` at buffer time ``time`` (ms).

        A key already buffered keeps its prior value (what downstream last saw); its latest
        change and context are replaced. A new key is buffered with ``prior = old``.

        :raises TypeError: if the key serializer gives anything but bytes for a new key;
            nothing is buffered then.
        """
        window_keys = self._window_keys
        window, part = (None, key) if window_keys is None else window_keys.split(key)
        bucket = self._buckets.get(time)
        if bucket is None:
            bucket = self._bucket(window)
        keys = self._whole_keys if bucket.keys is None else bucket.keys
        self._write(time, bucket, part, keys.identity(part), new, old, context[0], context,
                    None)

    def write(self, time: int, window: Any, part: Any, identity: Hashable, new: Any, old: Any,
              timestamp: int, context: Any, topic: str | None) -> None:
        """:meth:`put` of a key given as its window and part, with its part's identity.

        ``context`` is a :class:`~suppress.entry.RecordContext` with ``topic`` ``None``, or
        the offset of a record without headers read from ``topic``; ``timestamp`` (ms) is the
        one the entry leaves with. Without :class:`WindowKeys`, or with ``window`` ``None``
        (a key kept whole), ``part`` is the key.

        :raises TypeError: as :meth:`put`.
        """
        bucket = self._buckets.get(time)
        if bucket is None:
            bucket = self._bucket(window)
        self._write(time, bucket, part, identity, new, old, timestamp, context, topic)

    def _bucket(self, window: Any) -> _Bucket:
        """A new bucket for ``window`` (registered when its first entry is written)."""
        window_keys = self._window_keys
        if window_keys is None or window is None:
            return _Bucket(None, None)
        return _Bucket(window, window_keys.bucket_keys(window))

    def _write(self, time: int, bucket: _Bucket, part: Any, identity: Hashable, new: Any,
               old: Any, timestamp: int, context: Any, topic: str | None) -> None:
        """:meth:`write` into ``bucket``, the bucket of ``time`` (or a new one for it)."""
        entries = bucket.entries
        entry = entries.get(identity)
        if entry is not None:
            entries[identity] = self.updated(entry, new, timestamp, old, context, topic)
        else:
            entry = self._new_entry(self._whole_keys if bucket.keys is None else bucket.keys,
                                    part, new, timestamp, old, context, topic)
            if not entries:
                self._buckets[time] = bucket
                heapq.heappush(self._times, time)
            entries[identity] = entry
            bucket.run = None
            self._count += 1
        if self.changed is not None:
            self.changed[(time, identity)] = self._key(bucket, part)

    @staticmethod
    def _key(bucket: _Bucket, part: Any) -> Any:
        keys = bucket.keys
        return part if keys is None else keys.key_of(part)

    # -- removing ----------------------------------------------------------------------------

    def emit_closed(self, last_end: int, emit: EmitChange) -> int:
        """Hand every entry with buffer time <= ``last_end`` (ms) to ``emit``, in order.

        ``emit(key, new, old, context)`` runs before the entry is removed: if it raises, that
        entry and the rest stay buffered.

        :return: the number of entries removed.
        """
        times = self._times
        evicted = 0
        while times and times[0] <= last_end:
            time = times[0]
            bucket = self._buckets[time]
            bucket.run = None
            entries = bucket.entries
            items = list(entries.items())
            key_of = None if bucket.keys is None else bucket.keys.key_of
            changed = self.changed
            # by key bytes; equal bytes keep their buffering order (a stable sort)
            order: Iterable[int] = range(1)
            if len(items) > 1:
                key_bytes = [entry[_KEY_BYTES] for entry in entries.values()]
                order = sorted(range(len(items)), key=key_bytes.__getitem__)
            for i in order:
                identity, entry = items[i]
                key = entry[_PART] if key_of is None else key_of(entry[_PART])
                topic = entry[_TOPIC]
                emit(key, entry[_NEW], entry[_OLD], _context(entry) if topic is None else
                     _new_tuple(RecordContext, (entry[_TS], entry[_CTX], topic, 0, ())))
                del entries[identity]
                self._count -= 1
                if self._track_bytes:
                    self._bytes -= entry[_SIZE]
                if changed is not None:
                    changed[(time, identity)] = key
                evicted += 1
            assert not entries, "an entry joined a bucket while it was emitted"
            heapq.heappop(times)
            del self._buckets[time]
        return evicted

    def _evict_head(self, callback: Callable[[BufferedEntry], object]) -> None:
        """Hand the head entry's view to ``callback``, then remove it (kept if it raises)."""
        time = self._times[0]
        bucket = self._buckets[time]
        entries = bucket.entries
        run = bucket.run
        if run is None:
            bucket.run = run = _descending(entries)
        identity = run[-1]
        entry = entries[identity]
        callback(self._view(time, self._key(bucket, entry[_PART]), entry))
        run.pop()
        del entries[identity]
        self._count -= 1
        if self._track_bytes:
            self._bytes -= entry[_SIZE]
        if self.changed is not None:
            self.changed[(time, identity)] = self._key(bucket, entry[_PART])
        if not entries:
            heapq.heappop(self._times)
            del self._buckets[time]

    # -- looking up --------------------------------------------------------------------------

    def _find(self, key: Any) -> tuple[int, Any, tuple[Any, ...]] | None:
        """``(time, key, entry)`` of a buffered key, or ``None``.

        Runtime complexity: O(1) with ``time_of``, else O(t), t buffer times.
        """
        window_keys = self._window_keys
        window, part = (None, key) if window_keys is None else window_keys.split(key)
        buckets = self._buckets
        times = buckets if self._time_of is None else (self._time_of(key),)
        for time in times:
            bucket = buckets.get(time)
            if bucket is None or bucket.window != window:
                continue
            keys = self._whole_keys if bucket.keys is None else bucket.keys
            entry = bucket.entries.get(keys.identity(part))
            if entry is not None:
                return time, self._key(bucket, entry[_PART]), entry
        return None

    def _entries(self) -> Iterator[tuple[Any, ...]]:
        for bucket in self._buckets.values():
            yield from bucket.entries.values()

    def __iter__(self) -> Iterator[BufferedEntry]:
        """Views of the entries in eviction order. Runtime complexity: O(n log n)."""
        for time in sorted(self._buckets):
            bucket = self._buckets[time]
            entries = bucket.entries
            for identity in reversed(_descending(entries)):
                entry = entries[identity]
                yield self._view(time, self._key(bucket, entry[_PART]), entry)

    def _min_time(self) -> int:
        times = self._times
        return times[0] if times else LONG_MAX

    @property
    def splits_keys(self) -> bool:
        """Whether keys are a window and a part (:class:`WindowKeys` given)."""
        return self._window_keys is not None

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (used by tests after each operation)."""
        buckets = self._buckets
        assert sorted(self._times) == sorted(buckets), "times and buckets disagree"
        assert not self._times or self._times[0] == min(self._times), "heap order broken"
        assert self._count == sum(len(b.entries) for b in buckets.values()), "count drifted"
        total = 0
        for time, bucket in buckets.items():
            assert bucket.entries, f"empty bucket at {time}"
            keys = self._whole_keys if bucket.keys is None else bucket.keys
            for identity, entry in bucket.entries.items():
                part = entry[_PART]
                assert keys.identity(part) == identity, "entry under another identity"
                assert self._time_of is None or self._time_of(keys.key_of(part)) == time, \
                    "entry under another buffer time"
                total += self._check_entry(entry, keys.key_bytes)
            if bucket.run is not None:
                assert bucket.run == _descending(bucket.entries), "stale head run"
        assert not self._track_bytes or self._bytes == total, "byte total drifted"


def _descending(entries: dict[Hashable, tuple[Any, ...]]) -> list[Hashable]:
    """The identities by key bytes, descending; equal bytes in reverse buffering order."""
    ordered = sorted(entries, key=lambda identity: entries[identity][_KEY_BYTES])
    ordered.reverse()
    return ordered
