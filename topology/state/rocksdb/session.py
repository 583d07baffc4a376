"""Persistent session store on a StateDB keyspace: the in-memory store's behaviour, on disk.

Layout, one keyspace per store:

* a session: key = the start of its end-time segment (ms, :func:`encode_int64`), the
  serialized key *escaped* (every ``0x00`` byte written ``0x00 0x01``, then ``0x00 0x00``
  to end it, so that comparing escaped keys compares the keys and no escaped key is a prefix
  of another), the session end and the session start (:func:`encode_int64` each); value =
  the entry of :func:`~topology.state.rocksdb.entry.pack_entry` (the aggregate, the
  original key, and the end as timestamp). Byte order is the store's order, Kafka's
  ``RocksDBSessionStore``'s: segment, then key bytes, then end, then start;
* the observed stream time (the largest session end ever written, ms): key ``b""``, which
  sorts before every session, value ``encode_int64(observed)``;
* the longest session ever written (``end - start``, ms): key ``0x00`` (one byte), next; a search
  of one key for sessions starting by ``t`` stops at sessions ending after ``t + span``.

A query reads each live segment that can hold a match (at most four: segments are at least
half the retention wide) with its own iterator, all opened at the call, one segment after
the other. Retention as in
:mod:`topology.state.sessions`: when the oldest live segment moves on, one ``delete_range``
removes everything before it.

The store keeps nothing of the data in Python, and never commits, rolls back or closes the
:class:`~topology.state.rocksdb.StateDB`. After a ``rollback()`` of the database, construct
the store again: it reads its stream time back from the keyspace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

from ...windows import Windowed
from ..segments import check_store_durations, window_segment_interval
from ..sessions import (
    MAX_TIME,
    MIN_TIME,
    SessionQueries,
    SessionQuery,
    make_session,
    session_parts,
)
from .codec import decode_int64, encode_int64, prefix_end
from .entry import pack_entry, unpack_entry, unpack_value_only
from .keyspace import Keyspace
from .segmented import OBSERVED_KEY, SegmentedStore

__all__ = ("RocksDBSessionStore", "escape_key")

SPAN_KEY = b"\x00"
"""The key of the longest session ever written (``end - start``, ms): after the stream time,
before every session's key. A session starting at or before ``t`` ends at or before
``t + span``, which bounds a single key's search by start."""


def escape_key(key_bytes: bytes) -> bytes:
    r"""``key_bytes`` with ``0x00`` written ``0x00 0x01``, ended by ``0x00 0x00``.

    Escaped keys compare as the keys do, and none is a prefix of another, so a fixed-width
    suffix (the session times) can follow them without changing the order.

    >>> escape_key(b"a"), escape_key(b"a\x00b")
    (b'a\x00\x00', b'a\x00\x01b\x00\x00')
    >>> escape_key(b"a") < escape_key(b"a\x00") < escape_key(b"ab")
    True
    """
    return key_bytes.replace(b"\x00", b"\x00\x01") + b"\x00\x00"


class RocksDBSessionStore(SegmentedStore, SessionQueries):
    """Session store of ``Windowed(key, Window(start, end)) -> aggregate`` in a keyspace.

    Behaves as :class:`~topology.state.memory.InMemorySessionStore` but for the scan order,
    which is Kafka's ``RocksDBSessionStore``'s: by segment (of the session end,
    :attr:`segment_interval_ms` wide), then serialized key bytes (unsigned), then end, then
    start (for one key that is by end, then start), and ``backward_*`` queries give exactly
    the reversed sequence; ``None`` bounds are open; sessions with
    ``end <= observed - retention_ms`` are gone and writes to them ignored; once
    :meth:`close` ran every operation raises :class:`~topology.errors.StoreClosedError`.
    Keys are equal when their serialized bytes are. Keys and aggregates are written with
    the state codec (:mod:`topology.state.codec`).

    The data lives in ``keyspace`` only: constructing the store again on the same keyspace
    (after a commit and a restart, say) gives the same contents and the same stream time.

    Methods: looking up (:meth:`fetch_session`, :meth:`find_sessions`,
    :meth:`backward_find_sessions`, :meth:`fetch`, :meth:`backward_fetch`, :meth:`all`,
    :meth:`backward_all`, :meth:`approximate_num_entries`), writing (:meth:`put`,
    :meth:`remove`), miscellany (:meth:`close`, :attr:`written`,
    :attr:`observed_stream_time`).

    Runtime complexity: ``put``/``remove``/``fetch_session`` are one keyspace write or
    lookup (a put that moves the oldest live segment adds one ``delete_range``); a query
    seeks once per live segment that can hold a match (at most four) and reads lazily,
    O(log n + m) for the m sessions of the keys in range.

    >>> import tempfile
    >>> from topology.state.rocksdb import StateDB
    >>> from topology.windows import Window
    >>> with tempfile.TemporaryDirectory() as tmp, StateDB.open(tmp + "/s") as db:
    ...     s = RocksDBSessionStore("s", str.encode, 1_000, db.keyspace("s"))
    ...     s.put(Windowed("a", Window(0, 5)), 2); s.put(Windowed("a", Window(20, 20)), 1)
    ...     db.commit()
    ...     [(str(w), n) for w, n in s.find_sessions("a", 4, 30)]
    [('[a@0/5]', 2), ('[a@20/20]', 1)]

    :param retention_ms: how long (ms) behind the observed stream time sessions are kept.
    :param keyspace: where the data lives; the store owns it (no other writer).
    :param segment_interval_ms: the width (ms) of the end-time segments that expire whole
        (``None``: :func:`~topology.state.segments.window_segment_interval`); reopen with
        the same value.
    :raises TypeError: ``retention_ms`` or ``segment_interval_ms`` is not an ``int``.
    :raises ValueError: ``retention_ms < 0`` or ``segment_interval_ms < 1``.
    :raises StateStoreError: the keyspace's database is closed or failed.
    """

    persistent = True

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes | None],
                 retention_ms: int, keyspace: Keyspace,
                 segment_interval_ms: int | None = None) -> None:
        if segment_interval_ms is None and type(retention_ms) is int:
            segment_interval_ms = window_segment_interval(retention_ms)
        check_store_durations(("retention_ms", retention_ms, 0),
                              ("segment_interval_ms", segment_interval_ms, 1))
        assert segment_interval_ms is not None
        self._bind(name, key_serializer, retention_ms, keyspace)
        self.segment_interval_ms = segment_interval_ms
        """Width (ms) of the end-time segments that expire whole."""
        raw = keyspace.get(SPAN_KEY)
        self._span = 0 if raw is None else decode_int64(raw)
        self._live_from = self._first_live_segment(self._observed)

    def _min_live(self, observed: int) -> int:
        """The smallest session end (ms) still live at stream time ``observed``."""
        return max(observed - self.retention_ms + 1, MIN_TIME)

    def _first_live_segment(self, observed: int) -> int:
        """The first end time (ms) of the oldest segment live at stream time ``observed``."""
        return self._segment_start(self._min_live(observed))

    def _segment_start(self, end: int) -> int:
        """The first end time (ms) of the segment holding ``end``."""
        interval = self.segment_interval_ms
        return max(end // interval * interval, MIN_TIME)

    def _session_key(self, key: Any, start: int, end: int) -> bytes:
        return (encode_int64(self._segment_start(end)) + escape_key(self._key_bytes(key) or b"")
                + encode_int64(end) + encode_int64(start))

    # -- writing -------------------------------------------------------------------------------

    def put(self, session: Windowed, aggregate: Any) -> None:
        """Store ``aggregate`` for ``session`` = ``Windowed(key, Window(start, end))``.

        ``None`` removes the session. A session end beyond the observed stream time moves it
        (expiring older sessions); a write to an expired session is ignored.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: ``session`` is not a ``Windowed`` with a key and ``int`` bounds.
        :raises ValueError: the session's start is after its end.
        :raises StateCodecError: the key or the aggregate cannot be written by the state codec.
        """
        key, start, end = session_parts(session, "put")
        self._check_open()
        self._write(key, start, end, aggregate)

    def remove(self, session: Windowed) -> None:
        """Remove ``session`` (absent or expired: nothing happens).

        :raises StoreClosedError: the store is closed.
        :raises TypeError: ``session`` is not a ``Windowed`` with a key and ``int`` bounds.
        """
        key, start, end = session_parts(session, "remove")
        self._check_open()
        self._write(key, start, end, None)

    def _write(self, key: Any, start: int, end: int, aggregate: Any) -> None:
        if end > self._observed:
            self._advance(end)
        if end <= self._observed - self.retention_ms:
            return
        session_key = self._session_key(key, start, end)
        if aggregate is None:
            self._delete(session_key)
        else:
            self._put(session_key, pack_entry(aggregate, key, end))
            if end - start > self._span:
                self._span = end - start
                self._put(SPAN_KEY, encode_int64(self._span))
        self._written = True

    # -- looking up ----------------------------------------------------------------------------

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The aggregate of the session ``[start, end]`` of ``key``, or ``None``.

        :raises StoreClosedError: the store is closed.
        """
        self._check_open()
        if end <= self._observed - self.retention_ms:
            return None
        raw = self._get(self._session_key(key, start, end))
        return None if raw is None else unpack_value_only(raw)

    def _sessions(self, query: SessionQuery, reverse: bool) -> Iterator[tuple[Windowed, Any]]:
        """The live sessions matching ``query``: by segment, key bytes, end, start (or reversed)."""
        self._check_open()
        ser = self._key_bytes
        earliest = self._min_live(self._observed)
        if query.earliest_end is not None and query.earliest_end > earliest:
            earliest = query.earliest_end
        last_end = self._observed
        if query.single and query.latest_start is not None:
            last_end = min(last_end, query.latest_start + self._span)
        if earliest > last_end:
            return iter(())
        if query.single:
            escaped = escape_key(ser(query.key_from) or b"")
            low = escaped + encode_int64(earliest)
            high: bytes | None = (escaped + encode_int64(last_end + 1) if last_end < MAX_TIME
                                  else prefix_end(escaped))
        else:
            low = b"" if query.key_from is None else escape_key(ser(query.key_from) or b"")
            high = (None if query.key_to is None
                    else prefix_end(escape_key(ser(query.key_to) or b"")))
            if high is not None and low >= high:
                return iter(())
        items = self._keyspace.items
        sources = []
        interval = self.segment_interval_ms
        for segment in range(earliest // interval, last_end // interval + 1):
            prefix = encode_int64(max(segment * interval, MIN_TIME))
            upper = prefix_end(prefix) if high is None else prefix + high
            sources.append(items(prefix + low, upper, reverse))
        if reverse:
            sources.reverse()
        return _sessions(chain.from_iterable(sources), earliest, query.latest_start)

    def approximate_num_entries(self) -> int:
        """Number of live sessions (exact: it counts them).

        Runtime complexity: O(n), a scan of the keyspace.

        :raises StoreClosedError: the store is closed.
        """
        return sum(1 for _ in self.all())

    def _check(self) -> None:
        """Assert the layout invariants over every entry (tests call it after operations).

        The stored stream time is the store's; no session lies before the oldest live
        segment; each session sits in its end's segment, has ``start <= end``, decodes with
        nothing left over, holds no ``None`` and its key escapes back to the entry's key.
        """
        keyspace = self._keyspace
        stored = keyspace.get(OBSERVED_KEY)
        assert (-1 if stored is None else decode_int64(stored)) == self._observed, "stream time"
        assert self._live_from == self._segment_start(self._min_live(self._observed))
        stored = keyspace.get(SPAN_KEY)
        assert (0 if stored is None else decode_int64(stored)) == self._span, "longest session"
        for session_key, raw in keyspace.items(encode_int64(MIN_TIME)):
            segment = decode_int64(session_key[:8])
            end = decode_int64(session_key[-16:-8])
            start = decode_int64(session_key[-8:])
            assert segment >= self._live_from, f"session end {end} before the live segments"
            assert segment == self._segment_start(end), f"session end {end}: wrong segment"
            assert start <= end, f"session [{start}, {end}]"
            assert end - start <= self._span, f"session [{start}, {end}] longer than the span"
            key, value, _ = unpack_entry(raw)
            assert value is not None, f"session [{start}, {end}]: a stored None"
            assert session_key[8:-16] == escape_key(self._key_bytes(key) or b""), "key moved"


def _sessions(items: Iterator[tuple[bytes, bytes]], earliest: int, latest: int | None
              ) -> Iterator[tuple[Windowed, Any]]:
    """``(Windowed, aggregate)`` of each item with ``end >= earliest`` and ``start <= latest``."""
    if latest is None:
        latest = MAX_TIME
    low = encode_int64(earliest)
    high = encode_int64(latest)
    for session_key, raw in items:
        end_bytes = session_key[-16:-8]
        start_bytes = session_key[-8:]
        if end_bytes < low or start_bytes > high:
            continue
        key, value, _ = unpack_entry(raw)
        yield make_session(key, decode_int64(start_bytes), decode_int64(end_bytes)), value
