"""In-memory session store: sessions ``(key, start, end) -> aggregate``, with retention."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sortedcontainers import SortedList

from ...errors import StoreClosedError
from ...windows import Window, Windowed
from ..segments import check_store_durations, window_segment_interval
from ..sessions import (
    MAX_TIME,
    MIN_TIME,
    SessionQueries,
    SessionQuery,
    parse_find,
    session_parts,
)

__all__ = ("InMemorySessionStore",)

_NO_KEY = object()
_new = tuple.__new__
"""Builds the ``Window``/``Windowed`` named tuples of results without their Python ``__new__``."""


def _end_key_start(row: tuple[int, bytes, int, Any, Any]) -> tuple[int, bytes, int]:
    """The order of a key-range query: session end, key bytes, then session start."""
    return row[0], row[1], row[2]


class _Sessions:
    """The sessions of one key: ``(end, start)`` pairs in order, and their aggregates.

    ``span`` is at least ``end - start`` of every session of the key (the largest ever
    stored): a session starting at or before ``t`` ends at or before ``t + span``, which
    bounds a search by start.
    """

    __slots__ = ("aggs", "key", "span", "times")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.times: list[tuple[int, int]] = []
        self.aggs: list[Any] = []
        self.span = 0


class InMemorySessionStore(SessionQueries):
    """Session store of ``Windowed(key, Window(start, end)) -> aggregate`` (Kafka's SessionStore).

    Both ends of a session are inclusive (ms). Queries return ``(Windowed, aggregate)`` pairs
    in the order of Kafka's ``InMemorySessionStore``: over a key range (``all`` included)
    by session end, then serialized key bytes (unsigned), then session start; for one key
    by end, then start; ``backward_*`` queries give exactly the reversed sequence; ``None``
    bounds are open. A
    session with ``end <= observed_stream_time - retention_ms`` is expired: queries skip it
    and writes to it are ignored (see :mod:`topology.state.sessions`). Once :meth:`close`
    ran every public operation raises :class:`~topology.errors.StoreClosedError`.

    Methods: looking up (:meth:`fetch_session`, :meth:`find_sessions`,
    :meth:`backward_find_sessions`, :meth:`fetch`, :meth:`backward_fetch`, :meth:`all`,
    :meth:`backward_all`, :meth:`approximate_num_entries`), writing (:meth:`put`,
    :meth:`remove`), miscellany (:meth:`close`, :attr:`written`,
    :attr:`observed_stream_time`).

    Runtime complexity: ``put``/``remove``/``fetch_session`` are a dict lookup and a bisect
    in the key's sessions, O(log s) plus O(s) list insertion for s sessions of the key; a
    single-key query is O(log s + k) for the k sessions ending between
    ``earliest_session_end`` and ``latest_session_start`` plus the key's longest session, a
    key-range query O(log n + m log r) for the m sessions of the r keys in the range (each
    key's sessions are in order already: putting them in end order merges r runs). The key
    order
    is built by the first key-range query (O(n log n), once) and kept sorted from then on: a
    write that adds a key, or an expiry that drops one, costs O(log n) more. Expired sessions
    are dropped a segment at a time, when the stream time leaves it.

    >>> s = InMemorySessionStore("s", str.encode, retention_ms=1_000)
    >>> s.put(Windowed("a", Window(0, 5)), 2); s.put(Windowed("a", Window(20, 20)), 1)
    >>> [(str(w), n) for w, n in s.find_sessions("a", 4, 30)]
    [('[a@0/5]', 2), ('[a@20/20]', 1)]
    >>> [str(w) for w, _ in s.backward_fetch("a")]
    ['[a@20/20]', '[a@0/5]']

    :param key_serializer: the bytes of a key; they define equality and order.
    :param retention_ms: how long (ms) behind the observed stream time sessions are kept.
    :param segment_interval_ms: the width (ms) of the end-time segments that expire whole
        (``None``: :func:`~topology.state.segments.window_segment_interval`).
    :raises TypeError: ``retention_ms`` or ``segment_interval_ms`` is not an ``int``.
    :raises ValueError: ``retention_ms < 0`` or ``segment_interval_ms < 1``.
    """

    persistent = False
    is_open = True
    """False once :meth:`close` ran; every public operation then raises ``StoreClosedError``."""

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes | None],
                 retention_ms: int, segment_interval_ms: int | None = None) -> None:
        if segment_interval_ms is None and type(retention_ms) is int:
            segment_interval_ms = window_segment_interval(retention_ms)
        check_store_durations(("retention_ms", retention_ms, 0),
                              ("segment_interval_ms", segment_interval_ms, 1))
        assert segment_interval_ms is not None
        self.name = name
        self._key_bytes = key_serializer
        self._last_key: Any = _NO_KEY
        self._last_kb = b""
        """The bytes of the key last serialized, kept for a ``str`` key: a session
        aggregation queries and writes the same key in a row."""
        self.retention_ms = retention_ms
        self.segment_interval_ms = segment_interval_ms
        """Width (ms) of the end-time segments that expire whole."""
        self._by_key: dict[bytes, _Sessions] = {}
        self._keys: SortedList | None = None
        """The keys of ``_by_key`` sorted, for key-range queries; ``None`` until the first one
        (the aggregation's writes add and drop keys all the time, and many stores never see a
        key-range query), then kept up to date by every write or expiry that adds or drops a
        key."""
        self._segments: dict[int, set[bytes]] = {}
        """Segment id -> the keys that had a session ending in it (possibly removed since)."""
        self._observed = -1
        self._live_segment = self._segment_of_min_live(-1)
        self._expires_at = self._expiry_time(self._live_segment)
        """The observed stream time at which the oldest live segment expires."""
        self._written = False

    @property
    def observed_stream_time(self) -> int:
        """The largest session end written so far (ms); ``-1`` before the first write."""
        return self._observed

    @property
    def written(self) -> bool:
        """Whether anything was put or removed (a write to an expired session is not a write).

        Kafka logs every write of a store to its changelog, so this says whether the
        changelog topic exists.
        """
        return self._written

    def _segment_of_min_live(self, observed: int) -> int:
        return max(observed - self.retention_ms + 1, MIN_TIME) // self.segment_interval_ms

    def _expiry_time(self, live_segment: int) -> int:
        """The least observed stream time whose oldest live segment is after ``live_segment``."""
        return (live_segment + 1) * self.segment_interval_ms + self.retention_ms - 1

    # -- writing -------------------------------------------------------------------------------

    def put(self, session: Windowed, aggregate: Any) -> None:
        """Store ``aggregate`` for ``session`` = ``Windowed(key, Window(start, end))``.

        ``None`` removes the session. A session end beyond the observed stream time moves it
        (expiring older sessions); a write to an expired session is ignored.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: ``session`` is not a ``Windowed`` with a key and ``int`` bounds.
        :raises ValueError: the session's start is after its end.
        """
        key, start, end = session_parts(session, "put")
        if not self.is_open:
            self._check_open()
        self._write(key, start, end, aggregate)

    def remove(self, session: Windowed) -> None:
        """Remove ``session`` (absent or expired: nothing happens).

        :raises StoreClosedError: the store is closed.
        :raises TypeError: ``session`` is not a ``Windowed`` with a key and ``int`` bounds.
        """
        key, start, end = session_parts(session, "remove")
        if not self.is_open:
            self._check_open()
        self._write(key, start, end, None)

    def _kb(self, key: Any) -> bytes:
        """``key``'s bytes (the serializer's, ``b""`` for ``None``)."""
        if key is self._last_key:
            return self._last_kb
        kb = self._key_bytes(key) or b""
        if key.__class__ is str:  # immutable: the same object has the same bytes
            self._last_key, self._last_kb = key, kb
        return kb

    def put_session(self, key: Any, start: int, end: int, aggregate: Any) -> None:
        """``put(Windowed(key, Window(start, end)), aggregate)`` of a valid session.

        ``None`` removes the session.

        :raises StoreClosedError: the store is closed.
        """
        if not self.is_open:
            self._check_open()
        if end > self._observed:
            if end >= self._expires_at:
                self._advance(end)
            else:
                self._observed = end
        if end <= self._observed - self.retention_ms:
            return
        self._written = True
        kb = self._last_kb if key is self._last_key else self._kb(key)
        entry = self._by_key.get(kb)
        at = (end, start)
        if aggregate is None:
            if entry is not None:
                times = entry.times
                i = bisect_left(times, at)
                if i < len(times) and times[i] == at:
                    del times[i]
                    del entry.aggs[i]
            return
        if entry is None:
            entry = self._by_key[kb] = _Sessions(key)
            if self._keys is not None:
                self._keys.add(kb)
        times = entry.times
        i = bisect_left(times, at)
        if i < len(times) and times[i] == at:
            entry.aggs[i] = aggregate
        else:
            times.insert(i, at)
            entry.aggs.insert(i, aggregate)
            if end - start > entry.span:
                entry.span = end - start
        segment = end // self.segment_interval_ms
        keys = self._segments.get(segment)
        if keys is None:
            self._segments[segment] = {kb}
        else:
            keys.add(kb)

    _write = put_session  # put() and remove() check their arguments, then write

    def _advance(self, observed: int) -> None:
        """Move the stream time to ``observed`` and drop the segments it expires."""
        self._observed = observed
        live = self._segment_of_min_live(observed)
        if live <= self._live_segment:
            return
        self._live_segment = live
        self._expires_at = self._expiry_time(live)
        min_live = (max(observed - self.retention_ms + 1, MIN_TIME), MIN_TIME)
        by_key = self._by_key
        ordered = self._keys
        for segment in [s for s in self._segments if s < live]:
            for kb in self._segments.pop(segment):
                entry = by_key.get(kb)
                if entry is None:
                    continue
                i = bisect_left(entry.times, min_live)
                del entry.times[:i]
                del entry.aggs[:i]
                if not entry.times:
                    del by_key[kb]
                    if ordered is not None:
                        ordered.remove(kb)

    # -- looking up ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (idempotent): its data is dropped, and operations raise."""
        self.is_open = False
        self._by_key.clear()
        self._keys = None
        self._segments.clear()

    def _check_open(self) -> None:
        if not self.is_open:
            raise StoreClosedError(f"state store {self.name!r} is closed")

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of the session ``[start, end]`` of ``key``, or ``None``.

        :raises StoreClosedError: the store is closed.
        """
        self._check_open()
        if end <= self._observed - self.retention_ms:
            return None
        entry = self._by_key.get(self._key_bytes(key) or b"")
        if entry is None:
            return None
        times = entry.times
        at = (end, start)
        i = bisect_left(times, at)
        return entry.aggs[i] if i < len(times) and times[i] == at else None

    def _select(self, query: SessionQuery) -> list[tuple[Windowed, Any]]:
        """The live sessions matching ``query``: by end, key bytes, start (one key: end, start)."""
        self._check_open()
        if query.single:
            return self._find_key(query.key_from, query.earliest_end, query.latest_start)
        ser = self._key_bytes
        lo = None if query.key_from is None else ser(query.key_from) or b""
        hi = None if query.key_to is None else ser(query.key_to) or b""
        if lo is not None and hi is not None and lo > hi:
            return []
        by_key = self._by_key
        keys = self._keys
        if keys is None:
            keys = self._keys = SortedList(by_key)
        found: list[tuple[int, bytes, int, Any, Any]] = []
        earliest, latest = query.earliest_end, query.latest_start
        for kb in keys.irange(lo, hi):
            entry = by_key[kb]
            key = entry.key
            found += [(end, kb, start, key, agg)
                      for end, start, agg in self._bounded(entry, earliest, latest)]
        found.sort(key=_end_key_start)  # one sorted run per key: a merge
        new = _new
        return [(new(Windowed, (key, new(Window, (start, end)))), agg)
                for end, _, start, key, agg in found]

    def _find_key(self, key: Any, earliest_end: int | None, latest_start: int | None
                  ) -> list[tuple[Windowed, Any]]:
        """The live sessions of ``key`` with ``end >= earliest_end``, ``start <= latest_start``."""
        entry = self._by_key.get(self._key_bytes(key) or b"")
        if entry is None:
            return []
        return self._matching(entry, earliest_end, latest_start)

    def _matching(self, entry: _Sessions, earliest_end: int | None, latest_start: int | None
                  ) -> list[tuple[Windowed, Any]]:
        """The live sessions of one key's entry within the bounds, by end, then start."""
        key = entry.key
        new = _new
        return [(new(Windowed, (key, new(Window, (start, end)))), agg)
                for end, start, agg in self._bounded(entry, earliest_end, latest_start)]

    def _bounded(self, entry: _Sessions, earliest_end: int | None, latest_start: int | None
                 ) -> list[tuple[int, int, Any]]:
        """:meth:`_matching` as ``(end, start, aggregate)``."""
        earliest = self._observed - self.retention_ms + 1
        if earliest_end is not None and earliest_end > earliest:
            earliest = earliest_end
        times = entry.times
        if latest_start is None:
            latest_start = MAX_TIME
            stop = len(times)
        else:  # no session starting by latest_start ends after latest_start + span
            stop = bisect_right(times, (latest_start + entry.span, MAX_TIME))
        aggs = entry.aggs
        out = []
        for i in range(bisect_left(times, (earliest, MIN_TIME)), stop):
            end, start = times[i]
            if start <= latest_start:
                out.append((end, start, aggs[i]))
        return out

    def near(self, key: Any, earliest_end: int, latest_start: int
             ) -> Sequence[tuple[int, int, Any]]:
        """``find_sessions(key, earliest_end, latest_start)`` as ``(end, start, aggregate)``.

        :raises StoreClosedError: the store is closed.
        """
        if not self.is_open:
            self._check_open()
        entry = self._by_key.get(self._kb(key))
        if entry is None or not entry.times or entry.times[-1][0] < earliest_end:
            return ()  # no session of the key ends late enough (and nothing allocated)
        return self._bounded(entry, earliest_end, latest_start)

    def _sessions(self, query: SessionQuery, reverse: bool) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`_select` as an iterator, either way."""
        found = self._select(query)
        return reversed(found) if reverse else iter(found)

    def _find(self, args: tuple[Any, ...], method: str, reverse: bool
              ) -> Iterator[tuple[Windowed, Any]]:
        """The sessions of ``find_sessions(*args)``; one key with int times skips the parse."""
        if len(args) == 3 and self.is_open:  # the checks of parse_find, inline
            key, earliest, latest = args
            if (key is not None and type(earliest) is int and type(latest) is int
                    and MIN_TIME <= earliest <= MAX_TIME and MIN_TIME <= latest <= MAX_TIME):
                found = self._find_key(key, earliest, latest)
                return reversed(found) if reverse else iter(found)
        return self._sessions(parse_find(method, args), reverse)

    def approximate_num_entries(self) -> int:
        """Number of live sessions (exact).

        Runtime complexity: O(n) over the stored sessions.

        :raises StoreClosedError: the store is closed.
        """
        return len(self._select(SessionQuery(False, None, None, None, None)))

    def _check(self) -> None:
        """Assert the invariants (tests call it after operations).

        The ordered keys are the dict's keys; each key's sessions are sorted, unique,
        ``start <= end``, with a non-``None`` aggregate each; no segment older than the live
        ones is kept; every session of a live segment is listed under its segment.
        """
        assert self._keys is None or list(self._keys) == sorted(self._by_key), "ordered keys"
        if self._keys is not None:
            self._keys._check()
        assert self._live_segment == self._segment_of_min_live(self._observed), "live segment"
        assert self._segment_of_min_live(self._expires_at - 1) == self._live_segment < \
            self._segment_of_min_live(self._expires_at), "expiry time"
        interval = self.segment_interval_ms
        assert all(s >= self._live_segment for s in self._segments), "expired segment kept"
        for kb, entry in self._by_key.items():
            times = entry.times
            assert len(times) == len(entry.aggs), f"{kb!r}: times and aggregates"
            assert times == sorted(set(times)), f"{kb!r}: sessions sorted and unique"
            assert (self._key_bytes(entry.key) or b"") == kb, f"{kb!r}: the key moved"
            for (end, start), agg in zip(times, entry.aggs, strict=True):
                assert start <= end, f"{kb!r}: session [{start}, {end}]"
                assert end - start <= entry.span, f"{kb!r}: span {entry.span} too small"
                assert agg is not None, f"{kb!r}: a stored None"
                segment = end // interval
                if segment >= self._live_segment:
                    assert kb in self._segments.get(segment, ()), f"{kb!r}: segment {segment}"
