"""In-memory window store: ``(key, window start) -> (value, timestamp)``, with retention."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from sortedcontainers import SortedList

from ..._key_identity import key_identity, own_identity_type
from ...errors import StoreClosedError
from ...windows import Window, Windowed, time_window_end
from ..segments import check_store_durations
from ..window_queries import KEY, POINT, WindowQuery, check_time_bound, parse_window_fetch

__all__ = ("InMemoryWindowStore",)


def _first(row: tuple[bytes, Any, Any]) -> bytes:
    return row[0]


class InMemoryWindowStore:
    """Window store bucketed by window start; windows older than the retention are dropped.

    Retention: a window with ``start <= observed_stream_time - retention_ms`` is expired and
    removed; writes to it are ignored (the aggregation never sends them). Scans follow
    Kafka's ``InMemoryWindowStore``: ``fetch_all``, ``all`` and a key-range ``fetch`` are by
    window start, then key bytes; a single key's ``fetch`` by window start (see
    :mod:`topology.state.window_queries`); backward iteration is exactly the reverse;
    ``None`` bounds are open.

    Runtime complexity, n windows (buckets): a put or get O(1), or O(log n) for a put that
    creates a window once the store was queried; expiry O(log n) amortised per dropped
    window. A time-range query is O(log n + w) for the w windows in the range, plus
    O(b log b) per window of b keys (a window's keys are sorted per query: the aggregation
    writes them through :meth:`bucket`); a key-range ``fetch`` O(log n + B + m log b) for
    the B keys of those windows and m matches, at most b per window. The first query sorts
    the window starts once (O(n log n)); from then on every window created or dropped keeps
    them sorted.

    :param window_size_ms: used to rebuild ``Window(start, start + size)`` for results.
    :raises TypeError: ``window_size_ms`` or ``retention_ms`` is not an ``int``.
    :raises ValueError: ``window_size_ms < 0`` or ``retention_ms < 0``.
    """

    persistent = False
    is_open = True
    """False once :meth:`close` ran; every public operation then raises ``StoreClosedError``."""

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes | None],
                 window_size_ms: int, retention_ms: int) -> None:
        check_store_durations(("window_size_ms", window_size_ms, 0),
                              ("retention_ms", retention_ms, 0))
        self.name = name
        self._key_bytes = key_serializer
        self.key_identity = key_identity(key_serializer)
        """Keys are found by their identity (:mod:`topology._key_identity`)."""
        self.own_identity = own_identity_type(key_serializer)
        """Keys of exactly this type are their own identity (``None``: no type is)."""
        self._originals: dict[int, dict[Hashable, Any]] = {}
        """Per window start, the key written with each identity that is not the key itself."""
        self.window_size_ms = window_size_ms
        self.retention_ms = retention_ms
        self._by_start: dict[int, dict[Any, tuple[Any, int]]] = {}
        self._starts: list[int] = []
        """A heap of the buckets' starts, for expiry (a bucket stays until it expires, even
        when deletes emptied it)."""
        self._sorted: SortedList | None = None
        """The buckets' starts in order, for queries; ``None`` until the first query (with
        sliding windows nearly every window has a start of its own, and many stores are
        never queried), then kept up to date as buckets come and go."""
        self._observed = -1
        self.layout_version = 0
        """Changes whenever a window bucket is created or removed (lets callers cache one)."""
        self._deleted = False  # set by deletes only, so puts pay nothing for :attr:`written`

    @property
    def written(self) -> bool:
        """Whether anything was ever put or deleted (deletes of absent windows included).

        Kafka logs every write of a store to its changelog, so this says whether the
        changelog topic exists. Every put creates its window's bucket first; a put into a
        window past retention is ignored, and is not a write.
        """
        return self._deleted or self.layout_version > 0

    # -- hot path ------------------------------------------------------------------------------

    def get_with_timestamp(self, key: Any, start: int) -> tuple[Any, int] | None:
        """``(value, timestamp)`` of ``key`` in the window starting at ``start``, or ``None``."""
        bucket = self._by_start.get(start)
        return None if bucket is None else bucket.get(
            key if key.__class__ is self.own_identity else self.key_identity(key))

    def put_with_timestamp(self, key: Any, value: Any, start: int, timestamp: int) -> None:
        """Store ``value`` for ``key`` in window ``start``; ``None`` deletes it."""
        if start > self._observed:
            self._observed = start
            self._expire()
        if start <= self._observed - self.retention_ms:
            return
        bucket = self._by_start.get(start)
        identity = key if key.__class__ is self.own_identity else self.key_identity(key)
        if value is None:
            self._deleted = True
            if bucket is not None:
                bucket.pop(identity, None)
                originals = self._originals.get(start)
                if originals:
                    originals.pop(identity, None)
            return
        if bucket is None:
            bucket = self._new_bucket(start)
        if identity is not key:
            self.note_key(start, identity, key)
        bucket[identity] = (value, timestamp)

    def note_key(self, start: int, identity: Hashable, key: Any) -> None:
        """Remember ``key`` as the key of ``identity`` in window ``start``.

        A writer through :meth:`bucket` calls it for a key that is not its own identity.
        """
        originals = self._originals.get(start)
        if originals is None:
            originals = self._originals[start] = {}
        originals[identity] = key

    def key_of(self, start: int, identity: Hashable) -> Any:
        """The key written with ``identity`` in window ``start``."""
        originals = self._originals.get(start)
        return identity if not originals else originals.get(identity, identity)

    def _new_bucket(self, start: int) -> dict[Any, tuple[Any, int]]:
        bucket: dict[Any, tuple[Any, int]] = {}
        self._by_start[start] = bucket
        heapq.heappush(self._starts, start)
        if self._sorted is not None:
            self._sorted.add(start)
        self.layout_version += 1
        return bucket

    def bucket(self, start: int, create: bool = True) -> dict[Any, tuple[Any, int]] | None:
        """The live dict ``key -> (value, timestamp)`` of window ``start``, or ``None``.

        Created if needed (``create``; a creation may expire older windows); ``None`` if the
        window is past retention, or absent and not created.

        Its keys are identities (:attr:`key_identity`; a key of type :attr:`own_identity` is
        its own): a writer of another key also calls :meth:`note_key`.
        The aggregation's hot path writes through it; a ``None`` value must still go through
        :meth:`put_with_timestamp` (deletes). An item is a tuple ``(value, timestamp)``.
        """
        if not create:
            return self._by_start.get(start)
        if start > self._observed:
            self._observed = start
            self._expire()
        bucket = self._by_start.get(start)
        if bucket is None:
            if start <= self._observed - self.retention_ms:
                return None
            bucket = self._new_bucket(start)
        return bucket

    def _expire(self) -> None:
        limit = self._observed - self.retention_ms
        starts = self._starts
        if not starts or starts[0] > limit:
            return
        while starts and starts[0] <= limit:
            start = heapq.heappop(starts)
            del self._by_start[start]
            self._originals.pop(start, None)
            self.layout_version += 1
        ordered = self._sorted
        if ordered is not None:
            del ordered[:ordered.bisect_right(limit)]

    def _starts_between(self, time_from: int | None, time_to: int | None) -> list[int]:
        """The buckets' starts in ``[time_from, time_to]`` (``None``: open), ascending."""
        starts = self._sorted
        if starts is None:
            starts = self._sorted = SortedList(self._by_start)
        return list(starts.irange(time_from, time_to))

    # -- public window-store API ---------------------------------------------------------------

    def close(self) -> None:
        """Close the store (idempotent): its data is dropped, and operations raise."""
        self.is_open = False
        self._by_start.clear()
        self._originals.clear()
        self._starts.clear()
        self._sorted = None

    def _check_open(self) -> None:
        if not self.is_open:
            raise StoreClosedError(f"state store {self.name!r} is closed")

    def put(self, key: Any, value: Any, window_start: int) -> None:
        """Store ``value`` for ``key`` in the window starting at ``window_start`` (ms)."""
        self._check_open()
        self.put_with_timestamp(key, value, window_start, window_start)

    def fetch(self, *args: Any) -> Any:
        """One window's value, or the windows of a key or key range in a time range.

        ``fetch(key, start)``, ``fetch(key, time_from, time_to)`` or
        ``fetch(key_from, key_to, time_from, time_to)``. With a key and one time (ms): the
        value in the window starting there (or ``None``).
        With a key and two times: an iterator of ``(window start, value)`` for starts in
        ``[time_from, time_to]``, ascending. With a key range: an iterator of
        ``(Windowed, value)`` for keys in ``[key_from, key_to]`` (serialized bytes) and starts
        in ``[time_from, time_to]``, by start, then key bytes. ``None`` bounds are open.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: another number of arguments, a ``None`` single key, a time that is
            not an ``int`` (or ``None`` for a range bound).
        """
        query = parse_window_fetch("fetch", args, True)
        self._check_open()
        if query.form == POINT:
            assert query.time_from is not None
            item = self.get_with_timestamp(query.key_from, query.time_from)
            return None if item is None else item[0]
        if query.form == KEY:
            return iter(self._fetch_key(query.key_from, query.time_from, query.time_to))
        return iter(self._fetch_keys(query))

    def backward_fetch(self, *args: Any) -> Iterator[Any]:
        """:meth:`fetch` with a time range (one key or a key range), exactly reversed.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: as :meth:`fetch` (the point form is not accepted).
        """
        query = parse_window_fetch("backward_fetch", args, False)
        self._check_open()
        if query.form == KEY:
            return reversed(self._fetch_key(query.key_from, query.time_from, query.time_to))
        return reversed(self._fetch_keys(query))

    def _fetch_key(self, key: Any, time_from: int | None, time_to: int | None
                   ) -> list[tuple[int, Any]]:
        self._check_open()
        out = []
        identity = self.key_identity(key)
        for start in self._starts_between(time_from, time_to):
            item = self._by_start[start].get(identity)
            if item is not None:
                out.append((start, item[0]))
        return out

    def _fetch_keys(self, query: WindowQuery) -> list[tuple[Windowed, Any]]:
        """Windows of keys in the query's key range, by window start, then key bytes.

        Kafka's in-memory window store's order. Reads every window of the time range (the
        store is bucketed by window start) and sorts each window's matches: O(log n + B +
        m log b) for the B keys of the w windows in the time range, m matches, at most b per
        window.
        """
        ser = self._key_bytes
        lo = None if query.key_from is None else ser(query.key_from) or b""
        hi = None if query.key_to is None else ser(query.key_to) or b""
        if lo is not None and hi is not None and lo > hi:
            return []
        size = self.window_size_ms
        out = []
        key_bytes: dict[Any, bytes] = {}  # each key serialized once, not once per window
        for start in self._starts_between(query.time_from, query.time_to):
            found = []
            for identity, item in self._by_start[start].items():
                key = self.key_of(start, identity)
                kb = key_bytes.get(identity)
                if kb is None:
                    kb = key_bytes[identity] = ser(key) or b""
                if (lo is None or kb >= lo) and (hi is None or kb <= hi):
                    found.append((kb, key, item[0]))
            if not found:
                continue
            found.sort(key=_first)
            window = Window(start, time_window_end(start, size))
            out += [(Windowed(key, window), value) for _, key, value in found]
        return out

    def _select(self, time_from: int | None, time_to: int | None) -> list[tuple[Windowed, Any]]:
        self._check_open()
        ser = self._key_bytes
        size = self.window_size_ms
        out = []
        for start in self._starts_between(time_from, time_to):
            bucket = self._by_start[start]
            if not bucket:
                continue
            window = Window(start, time_window_end(start, size))
            keys = [(ser(key) or b"", identity, key) for identity, key
                    in ((i, self.key_of(start, i)) for i in bucket)]
            for _, identity, key in sorted(keys, key=_first):
                out.append((Windowed(key, window), bucket[identity][0]))
        return out

    def fetch_all(self, time_from: int | None, time_to: int | None
                  ) -> Iterator[tuple[Windowed, Any]]:
        """``(Windowed, value)`` for windows starting in ``[time_from, time_to]`` (ms).

        By window start, then key bytes; ``None`` bounds are open.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: a bound is neither an ``int`` nor ``None``.
        """
        return iter(self._select(check_time_bound(time_from, "time_from"),
                                 check_time_bound(time_to, "time_to")))

    def backward_fetch_all(self, time_from: int | None, time_to: int | None
                           ) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`fetch_all`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: a bound is neither an ``int`` nor ``None``.
        """
        return reversed(self._select(check_time_bound(time_from, "time_from"),
                                     check_time_bound(time_to, "time_to")))

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        """Every ``(Windowed, value)``, by window start then key bytes."""
        return iter(self._select(None, None))

    def items_by_start(self) -> Iterator[tuple[int, list[tuple[Any, Any, int]]]]:
        """Each window start with windows, ascending, and their ``(key, value, timestamp)``.

        A start's keys come in no particular order. For saving the store whole: no key is
        serialized, sorted or wrapped in a windowed key.

        :raises StoreClosedError: the store is closed.
        """
        self._check_open()
        return self._items_by_start()

    def _items_by_start(self) -> Iterator[tuple[int, list[tuple[Any, Any, int]]]]:
        for start in self._starts_between(None, None):
            bucket = self._by_start[start]
            if not bucket:
                continue
            originals = self._originals.get(start)
            if originals:
                yield start, [(originals.get(identity, identity), value, ts)
                              for identity, (value, ts) in bucket.items()]
            else:
                yield start, [(identity, value, ts) for identity, (value, ts) in bucket.items()]

    def backward_all(self) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`all` in reverse order."""
        return reversed(self._select(None, None))

    def _check(self) -> None:
        """Assert the invariants (tests call it after operations).

        The expiry heap and the sorted starts (once built) hold each bucket's start once;
        no bucket is past retention.
        """
        starts = self._starts
        assert sorted(starts) == sorted(self._by_start), "expiry heap != buckets"
        assert all(starts[(i - 1) // 2] <= starts[i] for i in range(1, len(starts))), "heap"
        if self._sorted is not None:
            self._sorted._check()
            assert list(self._sorted) == sorted(self._by_start), "sorted starts != buckets"
        limit = self._observed - self.retention_ms
        assert all(start > limit for start in self._by_start), "a bucket past retention"
        for start, originals in self._originals.items():
            bucket = self._by_start[start]
            for identity, key in originals.items():
                assert self.key_identity(key) == identity and identity in bucket, "stale key"
