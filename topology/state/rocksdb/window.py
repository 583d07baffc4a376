"""Persistent window store on a StateDB keyspace: the in-memory store's behaviour, on disk.

Layout, one keyspace per store:

* a window: key = window start (ms, :func:`~topology.state.rocksdb.encode_int64`: 8 bytes
  that sort numerically, negative starts first) + the serialized key; value = the entry of
  :func:`~topology.state.rocksdb.entry.pack_entry` (timestamp, value, original key). The
  keyspace's byte order is window start, then key bytes; a scan reads it one segment at a
  time and sorts each segment by key bytes, then start (Kafka's RocksDB window store's
  order: segment, then key, then start);
* the observed stream time (the largest window start ever written, ms): key ``b""``, which
  sorts before every window, value ``encode_int64(observed)``.

Retention: a window with ``start <= observed - retention_ms`` is expired. Reads skip expired
windows and writes to them are ignored, as in memory; physically, windows are dropped a
segment at a time (starts in ``[i * interval, (i + 1) * interval)``, the interval from
:func:`~topology.state.segments.window_segment_interval`): when the oldest live segment
moves on, one ``delete_range`` removes everything before it. No key exists below the start
of the oldest live segment.

The store keeps nothing of the data in Python but the entries its keyspace holds unencoded
until the commit (those that surely encode: numbers, ASCII strings; see
:func:`~topology.state.rocksdb.entry.holds`), and never commits, rolls back or closes the
:class:`~topology.state.rocksdb.StateDB`. After a ``rollback()`` of the database, construct
the store again: it reads its stream time back from the keyspace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ...windows import Window, Windowed, time_window_end
from ..segments import check_store_durations, window_segment_interval
from ..versioned import segment_id
from ..window_queries import KEY, POINT, WindowQuery, check_time_bound, parse_window_fetch
from .codec import decode_int64, encode_int64
from .entry import (
    unpack_entry,
    unpack_value_only,
)
from .keyspace import Keyspace
from .segmented import OBSERVED_KEY, SegmentedStore

__all__ = ("RocksDBWindowStore",)

"""The key of the observed stream time: shorter than, so before, every window's key."""
_MIN_START = -(2**63)
_MAX_START = 2**63 - 1


class RocksDBWindowStore(SegmentedStore):
    """Window store of ``(key, window start) -> (value, timestamp)`` in a keyspace.

    Behaves as :class:`~topology.state.memory.InMemoryWindowStore` but for the scan order,
    which is Kafka's ``RocksDBWindowStore``'s: ``fetch_all``, ``all`` and a key-range
    ``fetch`` are by segment (of the window start, :attr:`segment_interval_ms` wide), then
    serialized key bytes (unsigned), then window start; a single key's ``fetch`` by window
    start; backward iteration exactly the reverse, ``None`` bounds open;
    windows that start at or before ``observed - retention_ms`` are gone and writes to them
    ignored; once :meth:`close` ran every operation raises
    :class:`~topology.errors.StoreClosedError`. Keys are equal when their serialized bytes
    are. Keys and values are written with the state codec (:mod:`topology.state.codec`).
    Window starts are ms in ``[-2**63, 2**63)``.

    The data lives in ``keyspace`` only: constructing the store again on the same keyspace
    (after a commit and a restart, say) gives the same contents and the same stream time.

    Methods: looking up (:meth:`fetch`, :meth:`backward_fetch`, :meth:`fetch_all`,
    :meth:`backward_fetch_all`, :meth:`all`, :meth:`backward_all`,
    :meth:`get_with_timestamp`), writing (:meth:`put`, :meth:`put_with_timestamp`),
    miscellany (:meth:`close`, :attr:`written`, :attr:`observed_stream_time`).

    Runtime complexity: a point fetch or a put is one keyspace lookup or write (a put that
    moves the oldest live segment adds one ``delete_range``); ``fetch_all``/``all`` and a
    key-range ``fetch`` are one ordered iteration, read lazily a segment at a time (one
    segment's items in memory, sorted), O(log n + k log s) for k results, at most s per
    segment; ``fetch(key, from, to)`` seeks once or twice per distinct window start in the
    range.

    >>> import tempfile
    >>> from topology.state.rocksdb import StateDB
    >>> with tempfile.TemporaryDirectory() as tmp, StateDB.open(tmp + "/s") as db:
    ...     w = RocksDBWindowStore("w", str.encode, 10, 1_000, db.keyspace("w"))
    ...     w.put("b", 1, 0); w.put("a", 2, 0); w.put("a", 3, 10)
    ...     db.commit()
    ...     list(w.fetch("a", 0, 10)), [(str(k), v) for k, v in w.all()]
    ([(0, 2), (10, 3)], [('[a@0/10]', 2), ('[a@10/20]', 3), ('[b@0/10]', 1)])

    :param window_size_ms: used to rebuild ``Window(start, start + size)`` for results.
    :param retention_ms: how long (ms) behind the observed stream time windows are kept.
    :param keyspace: where the data lives; the store owns it (no other writer).
    :raises TypeError: ``window_size_ms`` or ``retention_ms`` is not an ``int``.
    :raises ValueError: ``window_size_ms < 0`` or ``retention_ms < 0``.
    :raises StateStoreError: the keyspace's database is closed or failed.
    """

    persistent = True

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes | None],
                 window_size_ms: int, retention_ms: int, keyspace: Keyspace) -> None:
        check_store_durations(("window_size_ms", window_size_ms, 0),
                              ("retention_ms", retention_ms, 0))
        self._bind(name, key_serializer, retention_ms, keyspace)
        self.window_size_ms = window_size_ms
        self.segment_interval_ms = window_segment_interval(retention_ms)
        """Width (ms) of the segments that expire whole."""
        self._live_from = self._first_live_segment(self._observed)
        self._hold(keyspace)

    def _first_live_segment(self, observed: int) -> int:
        """The first start (ms) of the oldest segment live at stream time ``observed``."""
        first_live = observed - self.retention_ms + 1
        interval = self.segment_interval_ms
        return max(segment_id(first_live, interval) * interval, _MIN_START)

    # -- hot path ------------------------------------------------------------------------------

    def get_with_timestamp(self, key: Any, start: int) -> tuple[Any, int] | None:
        """``(value, timestamp)`` of ``key`` in the window starting at ``start``, or ``None``.

        :raises StoreClosedError: the store is closed.
        """
        if start <= self._observed - self.retention_ms:
            return None
        return self._read_entry(encode_int64(start) + (self._key_bytes(key) or b""))

    def put_with_timestamp(self, key: Any, value: Any, start: int, timestamp: int) -> None:
        """Store ``value`` for ``key`` in window ``start`` (ms) at ``timestamp``; ``None`` deletes.

        A start beyond the observed stream time moves it (expiring older windows); a write
        to an expired window is ignored.

        :raises StoreClosedError: the store is closed.
        :raises StateCodecError: the key or the value cannot be written by the state codec.
        :raises ValueError: ``start`` is outside ``[-2**63, 2**63)``.
        """
        if start > self._observed:
            self._advance(start)
        if start <= self._observed - self.retention_ms:
            return
        window_key = encode_int64(start) + (self._key_bytes(key) or b"")
        self._write_entry(window_key, key, value, timestamp)
        self._written = True

    # -- public window-store API ---------------------------------------------------------------

    def put(self, key: Any, value: Any, window_start: int) -> None:
        """Store ``value`` for ``key`` in the window starting at ``window_start`` (ms).

        The record timestamp is ``window_start``; ``None`` deletes the window.

        :raises StoreClosedError: the store is closed.
        :raises StateCodecError: the key or the value cannot be written by the state codec.
        """
        self._check_open()
        self.put_with_timestamp(key, value, window_start, window_start)

    def fetch(self, *args: Any) -> Any:
        """One window's value, or the windows of a key or key range in a time range.

        ``fetch(key, start)``, ``fetch(key, time_from, time_to)`` or
        ``fetch(key_from, key_to, time_from, time_to)``. With a key and one time (ms): the
        value in the window starting there (or ``None``). With a key and two times: an
        iterator of ``(window start, value)`` for starts in ``[time_from, time_to]``,
        ascending. With a key range: an iterator of ``(Windowed, value)`` for keys in
        ``[key_from, key_to]`` (serialized bytes) and starts in ``[time_from, time_to]``, by
        segment, then key bytes, then start. ``None`` bounds are open. Iterators are the
        store as of the call.

        Runtime complexity: a point fetch is one lookup; a single key's range seeks once or
        twice per distinct window start in the range (each merging the keyspace's pending
        writes in the range); a key range reads every window of the time range once, lazily,
        and sorts each segment's matches, O(log n + w + m log s) for w windows in the time
        range, m matches, at most s per segment.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: another number of arguments, a ``None`` single key, a time that is
            not an ``int`` (or ``None`` for a range bound).
        """
        query = parse_window_fetch("fetch", args, True)
        self._check_open()
        if query.form == POINT:
            time_from = query.time_from
            assert time_from is not None
            if time_from <= self._observed - self.retention_ms:
                return None
            window_key = encode_int64(time_from) + (self._key_bytes(query.key_from) or b"")
            item = self._read_entry(window_key)
            return None if item is None else item[0]
        if query.form == KEY:
            return iter(self._fetch_key(query.key_from, query.time_from, query.time_to))
        return self._fetch_keys(query, False)

    def backward_fetch(self, *args: Any) -> Iterator[Any]:
        """:meth:`fetch` with a time range (one key or a key range), exactly reversed.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: as :meth:`fetch` (the point form is not accepted).
        """
        query = parse_window_fetch("backward_fetch", args, False)
        self._check_open()
        if query.form == KEY:
            return reversed(self._fetch_key(query.key_from, query.time_from, query.time_to))
        return self._fetch_keys(query, True)

    def _fetch_keys(self, query: WindowQuery, reverse: bool) -> Iterator[tuple[Windowed, Any]]:
        """Windows of keys in the query's key range, by segment, key bytes, then start."""
        ser = self._key_bytes
        lo = None if query.key_from is None else ser(query.key_from) or b""
        hi = None if query.key_to is None else ser(query.key_to) or b""
        if lo is not None and hi is not None and lo > hi:
            return iter(())
        items = self._window_items(query.time_from, query.time_to, reverse)
        if lo is not None or hi is not None:
            items = (item for item in items
                     if (lo is None or item[0][8:] >= lo) and (hi is None or item[0][8:] <= hi))
        return _windows(self._by_segment(items, reverse), self.window_size_ms)

    def _by_segment(self, items: Iterator[tuple[bytes, bytes]], reverse: bool
                    ) -> Iterator[tuple[bytes, bytes]]:
        """``items`` (by window start, or reversed) by segment, then key bytes, then start.

        Reads one segment's items at a time (they are contiguous: a segment is a range of
        starts), sorts them and yields them: lazy, with one segment in memory.
        """
        interval = self.segment_interval_ms
        segment: list[tuple[bytes, bytes]] = []
        limit = 0  # forward: the first start of the next segment; reverse: of this one
        for item in items:
            start = decode_int64(item[0][:8])
            if segment and (start < limit if reverse else start >= limit):
                segment.sort(key=_key_then_start, reverse=reverse)
                yield from segment
                segment = []
            if not segment:
                first = segment_id(start, interval) * interval
                limit = first if reverse else first + interval
            segment.append(item)
        segment.sort(key=_key_then_start, reverse=reverse)
        yield from segment

    def _fetch_key(self, key: Any, time_from: int | None, time_to: int | None
                   ) -> list[tuple[int, Any]]:
        """``(start, value)`` of ``key`` for live starts in ``[time_from, time_to]``.

        Skips from window start to window start: each seek finds the first entry at or after
        ``(start, key)``; it is the key's entry, or it names the next start worth a look.
        """
        self._check_open()
        key_bytes = self._key_bytes(key) or b""
        start = max(_MIN_START if time_from is None else time_from,
                    self._observed - self.retention_ms + 1, _MIN_START)
        last = _MAX_START if time_to is None else min(time_to, _MAX_START)
        upper = None if last == _MAX_START else encode_int64(last + 1)
        items = self._keyspace.items
        out = []
        while start <= last:
            item = next(items(encode_int64(start) + key_bytes, upper), None)
            if item is None:
                break
            found_key, raw = item
            found = decode_int64(found_key[:8])
            rest = found_key[8:]
            if rest == key_bytes:
                out.append((found, unpack_value_only(raw)))
                start = found + 1
            elif found > start and rest < key_bytes:
                start = found  # the key may be further on in this window
            else:
                start = found + 1
        return out

    def _select(self, time_from: int | None, time_to: int | None, reverse: bool
                ) -> Iterator[tuple[Windowed, Any]]:
        """``(Windowed, value)`` for live windows starting in ``[time_from, time_to]``."""
        self._check_open()
        return _windows(self._by_segment(self._window_items(time_from, time_to, reverse),
                                         reverse), self.window_size_ms)

    def _window_items(self, time_from: int | None, time_to: int | None, reverse: bool
                      ) -> Iterator[tuple[bytes, bytes]]:
        """The keyspace items of live windows starting in ``[time_from, time_to]``."""
        first_live = self._observed - self.retention_ms + 1
        start = first_live if time_from is None else max(time_from, first_live)
        last = _MAX_START if time_to is None else min(time_to, _MAX_START)
        if start > last:
            return iter(())
        lower = encode_int64(max(start, _MIN_START))
        upper = None if last == _MAX_START else encode_int64(last + 1)
        return self._keyspace.items(lower, upper, reverse)

    def fetch_all(self, time_from: int | None, time_to: int | None
                  ) -> Iterator[tuple[Windowed, Any]]:
        """``(Windowed, value)`` for windows starting in ``[time_from, time_to]`` (ms).

        By segment (of the window start), then key bytes, then window start; ``None`` bounds
        are open; the iterator sees the store as of the call and reads it lazily, a segment
        at a time. Runtime complexity: O(log n + k log s) for k results, at most s per
        segment (each segment's items are sorted as it is read).

        :raises StoreClosedError: the store is closed.
        :raises TypeError: a bound is neither an ``int`` nor ``None``.
        """
        return self._select(check_time_bound(time_from, "time_from"),
                            check_time_bound(time_to, "time_to"), False)

    def backward_fetch_all(self, time_from: int | None, time_to: int | None
                           ) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`fetch_all`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: a bound is neither an ``int`` nor ``None``.
        """
        return self._select(check_time_bound(time_from, "time_from"),
                            check_time_bound(time_to, "time_to"), True)

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        """Every ``(Windowed, value)``, by segment, then key bytes, then window start.

        :raises StoreClosedError: the store is closed.
        """
        return self._select(None, None, False)

    def backward_all(self) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`all` in reverse order.

        :raises StoreClosedError: the store is closed.
        """
        return self._select(None, None, True)

    def _check(self) -> None:
        """Assert the layout invariants over every entry (tests call it after operations).

        The stored stream time is the store's; no window lies before the oldest live
        segment; each window entry decodes with nothing left over, holds no ``None`` and its
        key serializes back to the entry's key bytes.
        """
        keyspace = self._keyspace
        stored = keyspace.get(OBSERVED_KEY)
        assert (-1 if stored is None else decode_int64(stored)) == self._observed, "stream time"
        assert self._live_from == self._first_live_segment(self._observed), "oldest live segment"
        ser = self._key_bytes
        for window_key, raw in keyspace.items(encode_int64(_MIN_START)):
            start = decode_int64(window_key[:8])
            assert start >= self._live_from, f"window {start} is before the live segments"
            key, value, _ = unpack_entry(raw)
            assert value is not None, f"window {start}: a stored None (puts of None delete)"
            assert (ser(key) or b"") == window_key[8:], f"window {start}: the key {key!r} moved"


def _key_then_start(item: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """The order of a window within its segment: key bytes, then start."""
    window_key = item[0]
    return window_key[8:], window_key[:8]


def _windows(items: Iterator[tuple[bytes, bytes]], size: int
             ) -> Iterator[tuple[Windowed, Any]]:
    """``(Windowed, value)`` of each keyspace item, decoded as it is read."""
    start_bytes = b""
    window = Window(0, 0)
    for window_key, raw in items:
        if window_key[:8] != start_bytes:
            start_bytes = window_key[:8]
            start = decode_int64(start_bytes)
            window = Window(start, time_window_end(start, size))
        key, value, _ = unpack_entry(raw)
        yield Windowed(key, window), value
