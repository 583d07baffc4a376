"""Persistent versioned key-value store: KIP-889's layout in one keyspace of a StateDB.

Data shapes, all in the one :class:`~topology.state.rocksdb.Keyspace` the caller passes (the
caller's ``StateDB`` commits it; this store never commits and never closes the database).
Numbers are 8-byte big-endian unsigned integers, so RocksDB's byte order is their numeric
order:

- **Latest-value area**, ``b"L" + key bytes`` -> the key's *head*: the timestamp of its latest
  version, the timestamps of its older versions (ascending), the key written with the state
  codec (so scans give keys back without a deserializer), and the latest version's payload.
  Keys order by the key serializer's bytes, as in the in-memory backend.
- **Segments**, ``b"S" + segment id + key bytes + timestamp`` -> the payload of one older
  version. A version lives in the segment of its ``valid_to`` (the next version's
  timestamp), ``segment id = valid_to // segment_interval_ms``, as in Kafka's
  ``RocksDBVersionedStore``; once history retention passes a segment, one
  ``delete_range`` drops it whole. One entry per version (where Kafka keeps one row per key
  and segment) makes a write a blind put, with no read-modify-write of a row.
- **Expiry index**, ``b"X" + segment id + key bytes`` -> empty, written with a delete or
  purge marker that is the latest version of its key, in the marker's segment: when that
  segment expires the head is forgotten (it would never expire otherwise, as latest values
  never do). An entry whose marker was since overwritten is skipped, then dropped.
- **Meta**, ``b"M"`` -> the observed stream time (signed) and the segment interval, rewritten
  whenever the stream time advances: a store built again on the keyspace after a commit and
  a restart resumes with it (and refuses another segment interval, which would misplace
  every segment entry).

A payload is one kind byte (value, delete marker, purge marker) followed, for a value, by
the value written with the state codec (:mod:`topology.state.codec`).

Why the head lists the timestamps of the older versions (KIP-889 probes segments newest
first instead): ``get(key, as_of)`` reads the head, bisects the list, and then reads exactly
the one segment entry that holds the answer; a multi-version query reads exactly the entries
it returns, in one ``multi_get``. The list is the directory of the key's history; timestamps
whose segment has expired are trimmed from it lazily, when the head is next rewritten (reads
never reach them: they are older than history retention). This is also why no version is
missed across segments (DESIGN.md, deliberate difference 2): reads follow the directory, not
the segments below ``to_time``.
"""

from __future__ import annotations

import datetime as _dt
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from ..api import Operation, VersionedRecord, VersionEntry
from ..codec import decode, encode
from ..versioned import Item, VersionedStoreBase
from .keyspace import Keyspace

__all__ = ("RocksDBVersionedKeyValueStore",)

_LATEST = b"L"
_LATEST_END = b"M"
_META = b"M"
_SEGMENTS = b"S"
_EXPIRY = b"X"

_U64 = struct.Struct(">Q")
_pack_u64 = _U64.pack
_unpack_u64 = _U64.unpack_from
_HEAD = struct.Struct(">QII")
"""Head header: latest timestamp, number of older versions, length of the encoded key."""
_HEAD_SIZE = _HEAD.size
_unpack_head = _HEAD.unpack_from
_pack_head = _HEAD.pack
_SEGMENT_PREFIX = struct.Struct(">cQ")
_pack_segment = _SEGMENT_PREFIX.pack
_META_VALUE = struct.Struct(">qQ")
"""Meta: observed stream time (ms, signed), segment interval (ms)."""

_PUT = Operation.PUT
_KIND_VALUE = 0
_KIND_DELETE = 1
_KIND_PURGE = 2
_KINDS = {Operation.PUT: _KIND_VALUE, Operation.DELETE: _KIND_DELETE,
          Operation.PURGE: _KIND_PURGE}
_OPERATIONS = {_KIND_DELETE: Operation.DELETE, _KIND_PURGE: Operation.PURGE}
_DELETE_PAYLOAD = bytes((_KIND_DELETE,))
_PURGE_PAYLOAD = bytes((_KIND_PURGE,))
_VALUE_TAG = bytes((_KIND_VALUE,))
_NEVER = float("inf")

_Record = VersionedRecord
_new = object.__new__
_set_value = vars(VersionedRecord)["value"].__set__
_set_timestamp = vars(VersionedRecord)["timestamp"].__set__
_set_valid_to = vars(VersionedRecord)["valid_to"].__set__

_TIMESTAMPS: dict[int, Callable[..., Any]] = {}
_TIMESTAMP_PACKERS: dict[int, Callable[..., bytes]] = {}


def _timestamps_unpacker(n: int) -> Callable[..., Any]:
    """``unpack_from`` of ``n`` big-endian u64 (cached per ``n``)."""
    unpack = _TIMESTAMPS.get(n)
    if unpack is None:
        unpack = _TIMESTAMPS[n] = struct.Struct(f">{n}Q").unpack_from
    return unpack


def _timestamps_packer(n: int) -> Callable[..., bytes]:
    """``pack`` of ``n`` big-endian u64 (cached per ``n``)."""
    pack = _TIMESTAMP_PACKERS.get(n)
    if pack is None:
        pack = _TIMESTAMP_PACKERS[n] = struct.Struct(f">{n}Q").pack
    return pack


def _item(key: Any, payload: bytes, timestamp: int, valid_to: int | None) -> Item:
    """The record (or marker entry) a payload stores."""
    kind = payload[0]
    if kind != _KIND_VALUE:
        return VersionEntry(key, None, timestamp, valid_to, _OPERATIONS[kind])
    record = _new(_Record)
    _set_value(record, decode(payload[1:]))
    _set_timestamp(record, timestamp)
    _set_valid_to(record, valid_to)
    return record


class _Head:
    """A decoded head: the latest version, the older versions' timestamps, the encoded key."""

    __slots__ = ("history", "key", "payload", "timestamp")

    def __init__(self, data: bytes) -> None:
        timestamp, n, key_length = _unpack_head(data)
        start = _HEAD_SIZE + 8 * n
        self.timestamp: int = timestamp
        self.history: list[int] = list(_timestamps_unpacker(n)(data, _HEAD_SIZE)) if n else []
        self.key: bytes = data[start:start + key_length]
        self.payload: bytes = data[start + key_length:]


def _head(timestamp: int, history: list[int], encoded_key: bytes, payload: bytes) -> bytes:
    """The bytes of a head."""
    n = len(history)
    if not n:
        return _pack_head(timestamp, 0, len(encoded_key)) + encoded_key + payload
    return b"".join((_pack_head(timestamp, n, len(encoded_key)),
                     _timestamps_packer(n)(*history), encoded_key, payload))


class RocksDBVersionedKeyValueStore(VersionedStoreBase):
    """A versioned key-value store kept in a keyspace of a :class:`StateDB` (persistent).

    All semantics come from :class:`~topology.state.versioned.VersionedStoreBase` (see it
    and ``docs/versioned.md``); reads return exactly what the in-memory backend returns. This
    class stores versions in the layout of the module docstring. Its writes are pending in
    the keyspace until the owner of the ``StateDB`` commits; reads see them at once. After a
    commit, a store built again on the same keyspace (after a restart, say) sees the same
    versions and the same observed stream time; ``dropped_records`` starts again at 0.

    Keys and values are written with the state codec (``None``, ``bool``, ``int``, ``float``,
    ``str``, ``bytes``, tuples, lists, dicts, windows and windowed keys); another type raises
    :class:`~topology.state.codec.StateCodecError` before anything changes. ``key_serializer``
    gives the bytes that order keys and must differ between distinct keys.

    Runtime complexity, v versions of the key (the head lists their timestamps, decoded on
    each access, a C loop): ``get`` one RocksDB read; ``get(as_of)`` two, plus O(v); ``put``
    one read plus O(v), and one more read for an out-of-order write that moves its
    predecessor to an earlier segment; ``get_versions`` one read plus one ``multi_get`` of
    the versions returned. Expiry is one ``delete_range`` per expired span of segments, plus
    one read per latest marker found in it.

    :param keyspace: where the store lives, used by this store alone; the caller owns its
        ``StateDB``.
    :param on_close: called once by :meth:`close`, after the store is closed (to release the
        database, for example).
    :raises TypeError: for arguments of the wrong type (see the base class for the rest).
    :raises ValueError: as the base class, or if the keyspace holds a store written with
        another segment interval.

    >>> import tempfile
    >>> from topology.state.rocksdb import StateDB
    >>> with tempfile.TemporaryDirectory() as tmp, StateDB.open(tmp) as db:
    ...     s = RocksDBVersionedKeyValueStore("rates", str.encode, db.keyspace("rates"),
    ...                                       history_retention_ms=60_000)
    ...     s.put("EUR", 1.10, 1_000), s.put("EUR", 1.12, 5_000), s.put("EUR", 1.11, 3_000)
    ...     s.get("EUR", as_of=4_000)
    (-1, -1, 5000)
    VersionedRecord(value=1.11, timestamp=3000, valid_to=5000)
    """

    persistent = True

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes], keyspace: Keyspace,
                 history_retention_ms: int | _dt.timedelta,
                 segment_interval_ms: int | _dt.timedelta | None = None, *,
                 max_versions: int | None = None,
                 on_close: Callable[[], object] | None = None) -> None:
        super().__init__(name, key_serializer, history_retention_ms, segment_interval_ms,
                         max_versions=max_versions)
        if not isinstance(keyspace, Keyspace):
            raise TypeError(f"keyspace must be a Keyspace, got {type(keyspace).__name__}")
        if on_close is not None and not callable(on_close):
            raise TypeError(f"on_close must be callable or None, got {on_close!r}")
        self._keyspace = keyspace
        self._on_close = on_close
        self._get = keyspace.get
        self._multi_get = keyspace.multi_get
        self._put = keyspace.put
        self._delete = keyspace.delete
        meta = keyspace.get(_META)
        if meta is not None:
            observed, interval = _META_VALUE.unpack(meta)
            if interval != self._si:
                raise ValueError(
                    f"keyspace {keyspace.name!r} holds versioned store data written with "
                    f"segment_interval_ms={interval}; open it with that interval, not "
                    f"{self._si}"
                )
        self._live_from = 0
        """Segments below this one are dropped (or were never written)."""
        self._next_expiry: float = self._si
        """The cutoff (ms) from which on :attr:`_live_from` moves."""
        if meta is not None:
            self._observed = observed
            self._cutoff = observed - self._hr
            self._drop_expired(self._cutoff)  # more than before if retention was shortened

    # -- reads -----------------------------------------------------------------------------------

    def _bytes(self, key: Any) -> bytes:
        key_bytes = self._key_serializer(key)
        if key_bytes.__class__ is not bytes:
            key_bytes = VersionedStoreBase._key_bytes(self, key)
        return key_bytes

    def _latest(self, key: Any) -> Item | None:
        data = self._get(_LATEST + self._bytes(key))
        if data is None:
            return None
        timestamp, n, key_length = _unpack_head(data)
        start = _HEAD_SIZE + 8 * n + key_length
        if data[start] != _KIND_VALUE:
            return VersionEntry(key, None, timestamp, None, _OPERATIONS[data[start]])
        record = _new(_Record)
        _set_value(record, decode(data[start + 1:]))
        _set_timestamp(record, timestamp)
        _set_valid_to(record, None)
        return record

    def _floor(self, key: Any, time: int) -> Item | None:
        key_bytes = self._bytes(key)
        data = self._get(_LATEST + key_bytes)
        if data is None:
            return None
        timestamp, n, key_length = _unpack_head(data)
        if timestamp <= time:
            start = _HEAD_SIZE + 8 * n + key_length
            return _item(key, data[start:], timestamp, None)
        if not n:
            return None
        history = _timestamps_unpacker(n)(data, _HEAD_SIZE)
        i = bisect_right(history, time)
        if not i:
            return None
        valid_to = history[i] if i < n else timestamp
        found = history[i - 1]
        payload = self._get(_pack_segment(_SEGMENTS, valid_to // self._si) + key_bytes
                            + _pack_u64(found))
        if payload is None:  # its segment expired: older than history retention
            return None
        return _item(key, payload, found, valid_to)

    def _versions(self, key: Any, lo: int, hi: int) -> list[Item]:
        key_bytes = self._bytes(key)
        data = self._get(_LATEST + key_bytes)
        if data is None:
            return []
        head = _Head(data)
        history = head.history
        n = len(history)
        start = bisect_left(history, lo)
        stop = bisect_right(history, hi, start)
        si = self._si
        out: list[Item] = []
        if start < stop:
            valid_tos = [history[i + 1] if i + 1 < n else head.timestamp
                         for i in range(start, stop)]
            payloads = self._multi_get([
                _pack_segment(_SEGMENTS, valid_to // si) + key_bytes + _pack_u64(history[i])
                for i, valid_to in zip(range(start, stop), valid_tos, strict=True)])
            out = [_item(key, payload, history[i], valid_to)
                   for i, valid_to, payload in zip(range(start, stop), valid_tos, payloads,
                                                   strict=True)
                   if payload is not None]
        if lo <= head.timestamp <= hi:
            out.append(_item(key, head.payload, head.timestamp, None))
        return out

    def _scan(self, lo: bytes | None, hi: bytes | None) -> list[tuple[Any, Item]]:
        start = _LATEST if lo is None else _LATEST + lo
        stop = _LATEST_END if hi is None else _LATEST + hi + b"\x00"
        out = []
        for _, data in self._keyspace.items(start, stop):
            head = _Head(data)
            key = decode(head.key)
            out.append((key, _item(key, head.payload, head.timestamp, None)))
        return out

    def _key_bytes(self, key: Any) -> bytes:
        return self._bytes(key)

    # -- writes ----------------------------------------------------------------------------------

    def _write(self, key: Any, timestamp: int, value: Any, operation: Operation) -> int | None:
        key_bytes = self._bytes(key)
        encoded_key = encode(key)
        if operation is _PUT:
            payload = _VALUE_TAG + encode(value)
        else:
            payload = _DELETE_PAYLOAD if operation is Operation.DELETE else _PURGE_PAYLOAD
        head_key = _LATEST + key_bytes
        data = self._get(head_key)
        if data is None:
            self._put(head_key, _head(timestamp, [], encoded_key, payload))
            if operation is not _PUT:
                self._mark(key_bytes, timestamp)
            return None
        head = _Head(data)
        if head.key != encoded_key:
            self._refuse(key, head.key, key_bytes)
        latest = head.timestamp
        history = head.history
        si = self._si
        put = self._put
        if timestamp >= latest:
            if timestamp > latest:
                put(_pack_segment(_SEGMENTS, timestamp // si) + key_bytes + _pack_u64(latest),
                    head.payload)
                history.append(latest)
                self._trim(history, timestamp)
            put(head_key, _head(timestamp, history, encoded_key, payload))
            if operation is not _PUT:
                self._mark(key_bytes, timestamp)
            return None
        n = len(history)
        i = bisect_left(history, timestamp)
        if i < n and history[i] == timestamp:
            valid_to = history[i + 1] if i + 1 < n else latest
            put(_pack_segment(_SEGMENTS, valid_to // si) + key_bytes + _pack_u64(timestamp),
                payload)
            return valid_to
        valid_to = history[i] if i < n else latest
        put(_pack_segment(_SEGMENTS, valid_to // si) + key_bytes + _pack_u64(timestamp),
            payload)
        if i and valid_to // si != timestamp // si:
            # the previous version now ends at ``timestamp``: it moves to that segment
            suffix = key_bytes + _pack_u64(history[i - 1])
            old = _pack_segment(_SEGMENTS, valid_to // si) + suffix
            moved = self._get(old)
            if moved is not None:
                self._delete(old)
                put(_pack_segment(_SEGMENTS, timestamp // si) + suffix, moved)
        history.insert(i, timestamp)
        self._trim(history, latest)
        put(head_key, _head(latest, history, encoded_key, head.payload))
        return valid_to

    def _purge(self, key: Any, timestamp: int) -> None:
        key_bytes = self._bytes(key)
        encoded_key = encode(key)
        head_key = _LATEST + key_bytes
        data = self._get(head_key)
        if data is not None:
            head = _Head(data)
            if head.key != encoded_key:
                self._refuse(key, head.key, key_bytes)
            self._forget(key_bytes, head.history, head.timestamp, len(head.history))
        self._put(head_key, _head(timestamp, [], encoded_key, _PURGE_PAYLOAD))
        self._mark(key_bytes, timestamp)

    def _drop_oldest(self, key: Any, keep: int) -> int | None:
        key_bytes = self._bytes(key)
        head_key = _LATEST + key_bytes
        data = self._get(head_key)
        assert data is not None, "the key has versions"
        head = _Head(data)
        history = head.history
        n = len(history) + 1 - keep
        if n <= 0:
            return None
        self._forget(key_bytes, history, head.timestamp, n)
        newest = history[n - 1]
        self._put(head_key, _head(head.timestamp, history[n:], head.key, head.payload))
        return newest

    def _forget(self, key_bytes: bytes, history: list[int], latest: int, n: int) -> None:
        """Delete the segment entries of the ``n`` oldest versions listed in ``history``."""
        si = self._si
        live_from = self._live_from
        delete = self._delete
        for i in range(n):
            segment = (history[i + 1] if i + 1 < len(history) else latest) // si
            if segment >= live_from:
                delete(_pack_segment(_SEGMENTS, segment) + key_bytes + _pack_u64(history[i]))

    def _trim(self, history: list[int], latest: int) -> None:
        """Drop from ``history`` the timestamps whose segment entry has expired."""
        live_from = self._live_from * self._si
        drop = 0
        n = len(history)
        while drop < n and (history[drop + 1] if drop + 1 < n else latest) < live_from:
            drop += 1
        if drop:
            del history[:drop]

    def _mark(self, key_bytes: bytes, timestamp: int) -> None:
        """Note that ``key_bytes``'s latest version is a marker at ``timestamp``."""
        self._put(_pack_segment(_EXPIRY, timestamp // self._si) + key_bytes, b"")

    def _refuse(self, key: Any, stored: bytes, key_bytes: bytes) -> None:
        raise ValueError(
            f"key_serializer gives keys {decode(stored)!r} and {key!r} the same bytes "
            f"{key_bytes!r}; distinct keys must serialize differently"
        )

    # -- physical expiry -------------------------------------------------------------------------

    def _expire(self, cutoff: int) -> None:
        """Record the new observed stream time; drop the segments history retention passed.

        The base class calls this exactly when the observed stream time advances.
        """
        self._put(_META, _META_VALUE.pack(self._observed, self._si))
        if cutoff >= self._next_expiry:
            self._drop_expired(cutoff)

    def _drop_expired(self, cutoff: int) -> None:
        """Drop the segments before ``cutoff``'s and the heads of markers in them."""
        live_from = cutoff // self._si
        if live_from <= self._live_from:
            return
        bound = _pack_segment(_EXPIRY, live_from)
        marked = [key[9:] for key, _ in self._keyspace.items(_EXPIRY, bound)]
        for key_bytes in marked:
            head_key = _LATEST + key_bytes
            data = self._get(head_key)
            if data is None:
                continue
            timestamp, n, key_length = _unpack_head(data)
            if (data[_HEAD_SIZE + 8 * n + key_length] != _KIND_VALUE
                    and timestamp // self._si < live_from):
                self._delete(head_key)
        if marked:
            self._keyspace.delete_range(_EXPIRY, bound)
        self._keyspace.delete_range(_SEGMENTS, _pack_segment(_SEGMENTS, live_from))
        self._live_from = live_from
        self._next_expiry = (live_from + 1) * self._si

    def _close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    # -- invariants ------------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every invariant of the layout (the tests call it after each operation).

        Heads: history strictly ascending and older than the latest, the encoded key decodes
        to a key that serializes to the head's key bytes, ``max_versions`` respected. Every
        listed version whose segment is live has its entry, and every segment entry is
        listed by its head; no segment below the live one is left. Every head whose latest
        version is a marker has its expiry entry and is not expired. The meta entry holds the
        observed stream time once there is one. The keyspace's own invariants hold.
        """
        self._keyspace._check()
        si = self._si
        live_from = self._live_from
        assert self._next_expiry == (live_from + 1) * si, (self._next_expiry, live_from)
        assert live_from == max(self._cutoff, 0) // si, (live_from, self._cutoff)
        expected: set[bytes] = set()
        marks: set[bytes] = set()
        meta = None
        segments: set[bytes] = set()
        found_marks: set[bytes] = set()
        for key, data in self._keyspace.items():
            prefix = key[:1]
            if prefix == _META:
                assert key == _META, key
                meta = _META_VALUE.unpack(data)
            elif prefix == _SEGMENTS:
                assert _unpack_u64(key, 1)[0] >= live_from, f"expired segment entry {key!r}"
                segments.add(key)
            elif prefix == _EXPIRY:
                assert data == b"", key
                found_marks.add(key)
            else:
                assert prefix == _LATEST, f"foreign key {key!r}"
                key_bytes = key[1:]
                head = _Head(data)
                assert self._bytes(decode(head.key)) == key_bytes, (key, head.key)
                history = head.history
                times = [*history, head.timestamp]
                assert all(a < b for a, b in zip(times, times[1:], strict=False)), (key, times)
                if self._max_versions is not None:
                    assert len(history) < self._max_versions, (key, history)
                assert head.payload[0] in (_KIND_VALUE, _KIND_DELETE, _KIND_PURGE), key
                assert head.payload[0] == _KIND_VALUE or len(head.payload) == 1, key
                for i, version in enumerate(history):
                    segment = (history[i + 1] if i + 1 < len(history) else head.timestamp) // si
                    if segment >= live_from:
                        expected.add(_pack_segment(_SEGMENTS, segment) + key_bytes
                                     + _pack_u64(version))
                if head.payload[0] != _KIND_VALUE:
                    assert head.timestamp // si >= live_from, f"{key!r}: expired marker kept"
                    marks.add(_pack_segment(_EXPIRY, head.timestamp // si) + key_bytes)
        assert segments == expected, (sorted(segments ^ expected), "segment entries")
        assert marks <= found_marks, (sorted(marks - found_marks), "expiry entries")
        if self._observed >= 0:
            assert meta == (self._observed, si), (meta, self._observed)
