"""Persistent versioned key-value store: KIP-889's layout in one keyspace of a StateDB.

Data shapes, all in the one :class:`~topology.state.rocksdb.Keyspace` the caller passes (the
caller's ``StateDB`` commits it; this store never commits and never closes the database).
Numbers are 8-byte big-endian unsigned integers, so RocksDB's byte order is their numeric
order:

- **Latest-value area**, ``b"L" + key bytes`` -> the key's *head*: the timestamp of its latest
  version; the *directory* of its older versions (their timestamps, ascending, then the
  segment that holds each); the key written with the state codec (so scans give keys back
  without a deserializer); and the latest version's payload. Keys order by the key
  serializer's bytes, as in the in-memory backend.
- **Segments**, ``b"S" + segment id + key bytes + timestamp`` -> the payload of one older
  version. A version is written to the segment of its ``valid_to`` (the next version's
  timestamp), ``segment id = valid_to // segment_interval_ms``, as in Kafka's
  ``RocksDBVersionedStore``; once history retention passes a segment, one ``delete_range``
  drops it whole. One entry per version (Kafka keeps one row per key and segment) makes every
  write a blind put, with no read-modify-write of a row.
- **Expiry index**, ``b"X" + segment id + key bytes`` -> empty, written with a delete or
  purge marker that is the latest version of its key, in the marker's segment: when that
  segment expires the head is forgotten (it would never expire otherwise, as latest values
  never do). An entry whose marker was since overwritten is skipped, then dropped.
- **Meta**, ``b"M"`` -> the observed stream time (signed) and the segment interval, rewritten
  whenever the stream time advances: a store built again on the keyspace after a commit and
  a restart resumes with it (and refuses another segment interval, which would misplace
  every segment entry).

A payload is a value written with the state codec (:mod:`topology.state.codec`), or one byte
that no codec value starts with: ``0x01`` for a delete marker, ``0x02`` for a purge marker.

Why the head holds a directory (KIP-889 probes segments newest first instead):
``get(key, as_of)`` reads the head, bisects the directory, and reads exactly the one segment
entry that holds the answer; a multi-version query reads exactly the entries it returns, in
one ``multi_get``; and a version never moves. Kafka moves a version to an earlier segment
when an out-of-order write shortens its validity; here it stays where it is, the directory
says where, and it is dropped with that later segment: later than it could be, never while
it is visible. Reads follow the directory, not the segments below ``to_time``, so no version
is missed across segments (DESIGN.md, deliberate difference 2).

Physical expiry never changes what a read returns (see :mod:`topology.state.versioned`): a
version whose segment is gone is older than history retention, and so is every older
version of its key. The directory forgets such versions lazily, when the head is next
rewritten.
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
"""Head header: latest timestamp, number n of older versions, length of the encoded key.

Then 2n u64 (the n timestamps, then their n segments), the encoded key, the payload."""
_HEAD_SIZE = _HEAD.size
_unpack_head = _HEAD.unpack_from
_pack_head = _HEAD.pack
_pack_prefix = struct.Struct(">cQ").pack
_META_VALUE = struct.Struct(">qQ")
"""Meta: observed stream time (ms, signed), segment interval (ms)."""

_PUT = Operation.PUT
_DELETE = Operation.DELETE
_DELETED = b"\x01"
_PURGED = b"\x02"
_MARKERS = {_DELETED[0]: Operation.DELETE, _PURGED[0]: Operation.PURGE}
"""Marker payloads by first byte; no codec value starts with these bytes."""
_marker = _MARKERS.get

_Record = VersionedRecord
_new = object.__new__
_set_value = vars(VersionedRecord)["value"].__set__
_set_timestamp = vars(VersionedRecord)["timestamp"].__set__
_set_valid_to = vars(VersionedRecord)["valid_to"].__set__

_UNPACKERS: dict[int, Callable[..., tuple[int, ...]]] = {}
_PACKERS: dict[int, Callable[..., bytes]] = {}


def _unpacker(n: int) -> Callable[..., tuple[int, ...]]:
    """``unpack_from`` of ``n`` big-endian u64 (cached per ``n``)."""
    unpack = _UNPACKERS.get(n)
    if unpack is None:
        unpack = _UNPACKERS[n] = struct.Struct(f">{n}Q").unpack_from
    return unpack


def _packer(n: int) -> Callable[..., bytes]:
    """``pack`` of ``n`` big-endian u64 (cached per ``n``)."""
    pack = _PACKERS.get(n)
    if pack is None:
        pack = _PACKERS[n] = struct.Struct(f">{n}Q").pack
    return pack


def _item(key: Any, payload: bytes, timestamp: int, valid_to: int | None) -> Item:
    """The record (or marker entry) a payload stores."""
    operation = _marker(payload[0])
    if operation is not None:
        return VersionEntry(key, None, timestamp, valid_to, operation)
    record = _new(_Record)
    _set_value(record, decode(payload))
    _set_timestamp(record, timestamp)
    _set_valid_to(record, valid_to)
    return record


def _entry_key(segment: int, key_bytes: bytes, timestamp: int) -> bytes:
    """The key of a version's segment entry."""
    return _pack_prefix(_SEGMENTS, segment) + key_bytes + _pack_u64(timestamp)


def _read_head(data: bytes) -> tuple[int, list[int], list[int], bytes, bytes]:
    """Decode a head: latest timestamp, older timestamps, their segments, key, payload."""
    timestamp, n, key_length = _unpack_head(data)
    if n:
        directory = _unpacker(2 * n)(data, _HEAD_SIZE)
        times, segments = list(directory[:n]), list(directory[n:])
    else:
        times, segments = [], []
    start = _HEAD_SIZE + 16 * n
    return (timestamp, times, segments, data[start:start + key_length],
            data[start + key_length:])


def _head(timestamp: int, times: list[int], segments: list[int], encoded_key: bytes,
          payload: bytes) -> bytes:
    """The bytes of a head."""
    n = len(times)
    if not n:
        return _pack_head(timestamp, 0, len(encoded_key)) + encoded_key + payload
    return b"".join((_pack_head(timestamp, n, len(encoded_key)),
                     _packer(2 * n)(*times, *segments), encoded_key, payload))


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

    Runtime complexity, v versions of the key (a head's directory is decoded by ``struct``,
    O(v) in C): ``get`` one RocksDB read; ``get(as_of)`` two, plus O(v); ``put`` one read and
    two writes, plus O(v); ``get_versions`` one read and one ``multi_get`` of the versions
    returned; ``purge`` and ``max_versions`` one delete per version dropped; key scans one
    iteration over the heads in range. Expiry: one ``delete_range`` each time the cutoff
    enters a new segment, plus one read per latest marker in the expired segments.

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
        self._live_from = 0
        """Segments below this one are dropped (or were never written)."""
        self._next_expiry: float = self._si
        """The cutoff (ms) from which on :attr:`_live_from` moves."""
        meta = keyspace.get(_META)
        if meta is not None:
            observed, interval = _META_VALUE.unpack(meta)
            if interval != self._si:
                raise ValueError(
                    f"keyspace {keyspace.name!r} holds versioned store data written with "
                    f"segment_interval_ms={interval}; open it with that interval, not "
                    f"{self._si}"
                )
            self._observed = observed
            self._cutoff = observed - self._hr
            self._drop_expired(self._cutoff)  # more than before if retention was shortened

    # -- reads -----------------------------------------------------------------------------------

    def _latest(self, key: Any) -> Item | None:
        data = self._get(_LATEST + self._key_bytes(key))
        if data is None:
            return None
        timestamp, n, key_length = _unpack_head(data)
        payload = data[_HEAD_SIZE + 16 * n + key_length:]
        operation = _marker(payload[0])
        if operation is not None:
            return VersionEntry(key, None, timestamp, None, operation)
        record = _new(_Record)
        _set_value(record, decode(payload))
        _set_timestamp(record, timestamp)
        _set_valid_to(record, None)
        return record

    def _floor(self, key: Any, time: int) -> Item | None:
        key_bytes = self._key_bytes(key)
        data = self._get(_LATEST + key_bytes)
        if data is None:
            return None
        timestamp, n, key_length = _unpack_head(data)
        if timestamp <= time:
            return _item(key, data[_HEAD_SIZE + 16 * n + key_length:], timestamp, None)
        if not n:
            return None
        times = _unpacker(n)(data, _HEAD_SIZE)
        i = bisect_right(times, time)
        if not i:
            return None
        found = times[i - 1]
        segment = _unpack_u64(data, _HEAD_SIZE + 8 * (n + i - 1))[0]
        payload = self._get(_pack_prefix(_SEGMENTS, segment) + key_bytes + _pack_u64(found))
        if payload is None:  # its segment expired: older than history retention
            return None
        operation = _marker(payload[0])
        valid_to = times[i] if i < n else timestamp
        if operation is not None:
            return VersionEntry(key, None, found, valid_to, operation)
        record = _new(_Record)
        _set_value(record, decode(payload))
        _set_timestamp(record, found)
        _set_valid_to(record, valid_to)
        return record

    def _versions(self, key: Any, lo: int, hi: int) -> list[Item]:
        key_bytes = self._key_bytes(key)
        data = self._get(_LATEST + key_bytes)
        if data is None:
            return []
        timestamp, times, segments, _, payload = _read_head(data)
        n = len(times)
        start = bisect_left(times, lo)
        stop = bisect_right(times, hi, start)
        out: list[Item] = []
        if start < stop:
            found = self._multi_get([_entry_key(segments[i], key_bytes, times[i])
                                     for i in range(start, stop)])
            out = [_item(key, entry, times[i], times[i + 1] if i + 1 < n else timestamp)
                   for i, entry in zip(range(start, stop), found, strict=True)
                   if entry is not None]
        if lo <= timestamp <= hi:
            out.append(_item(key, payload, timestamp, None))
        return out

    def _scan(self, lo: bytes | None, hi: bytes | None) -> list[tuple[Any, Item]]:
        start = _LATEST if lo is None else _LATEST + lo
        stop = _LATEST_END if hi is None else _LATEST + hi + b"\x00"
        out = []
        for _, data in self._keyspace.items(start, stop):
            timestamp, _, _, encoded_key, payload = _read_head(data)
            key = decode(encoded_key)
            out.append((key, _item(key, payload, timestamp, None)))
        return out

    # -- writes ----------------------------------------------------------------------------------

    def _write(self, key: Any, timestamp: int, value: Any, operation: Operation) -> int | None:
        # Hot path: the head is spliced as bytes; only the timestamps are decoded, and only
        # for an out-of-order write.
        key_bytes = self._key_serializer(key)
        if key_bytes.__class__ is not bytes:
            key_bytes = self._key_bytes(key)
        encoded_key = encode(key)
        if operation is _PUT:
            payload = encode(value)
        else:
            payload = _DELETED if operation is _DELETE else _PURGED
        head_key = _LATEST + key_bytes
        data = self._get(head_key)
        if data is None:
            self._put(head_key, _pack_head(timestamp, 0, len(encoded_key)) + encoded_key
                      + payload)
            if operation is not _PUT:
                self._mark(key_bytes, timestamp)
            return None
        latest, n, key_length = _unpack_head(data)
        middle = _HEAD_SIZE + 8 * n
        key_start = middle + 8 * n
        payload_start = key_start + key_length
        stored_key = data[key_start:payload_start]
        if stored_key != encoded_key:
            self._refuse(key, stored_key, key_bytes)
        put = self._put
        if timestamp > latest:  # the latest version becomes history, ending at timestamp
            segment = timestamp // self._si
            put(_pack_prefix(_SEGMENTS, segment) + key_bytes + _pack_u64(latest),
                data[payload_start:])
            head = b"".join((_pack_head(timestamp, n + 1, key_length), data[_HEAD_SIZE:middle],
                             _pack_u64(latest), data[middle:key_start], _pack_u64(segment),
                             encoded_key, payload))
            if n and _unpack_u64(head, middle + 8)[0] < self._live_from:
                head = self._trimmed(key_bytes, head)
        elif timestamp == latest:
            head = data[:payload_start] + payload
        else:
            times = _unpacker(n)(data, _HEAD_SIZE)
            i = bisect_left(times, timestamp)
            if i < n and times[i] == timestamp:  # replaced where it is; the head stays
                segment = _unpack_u64(data, middle + 8 * i)[0]
                put(_pack_prefix(_SEGMENTS, segment) + key_bytes + _pack_u64(timestamp),
                    payload)
                return times[i + 1] if i + 1 < n else latest
            valid_to = times[i] if i < n else latest
            segment = valid_to // self._si
            put(_pack_prefix(_SEGMENTS, segment) + key_bytes + _pack_u64(timestamp), payload)
            at = _HEAD_SIZE + 8 * i
            at_segment = middle + 8 * i
            head = b"".join((_pack_head(latest, n + 1, key_length), data[_HEAD_SIZE:at],
                             _pack_u64(timestamp), data[at:at_segment], _pack_u64(segment),
                             data[at_segment:]))
            if _unpack_u64(head, middle + 8)[0] < self._live_from:
                head = self._trimmed(key_bytes, head)
            put(head_key, head)
            return valid_to
        put(head_key, head)
        if operation is not _PUT:
            self._mark(key_bytes, timestamp)
        return None

    def _purge(self, key: Any, timestamp: int) -> None:
        key_bytes = self._key_bytes(key)
        encoded_key = encode(key)
        head_key = _LATEST + key_bytes
        data = self._get(head_key)
        if data is not None:
            _, times, segments, stored_key, _ = _read_head(data)
            if stored_key != encoded_key:
                self._refuse(key, stored_key, key_bytes)
            self._forget(key_bytes, times, segments, len(times))
        self._put(head_key, _head(timestamp, [], [], encoded_key, _PURGED))
        self._mark(key_bytes, timestamp)

    def _drop_oldest(self, key: Any, keep: int) -> int | None:
        key_bytes = self._key_bytes(key)
        head_key = _LATEST + key_bytes
        data = self._get(head_key)
        assert data is not None, "the key has versions"
        latest, times, segments, encoded_key, payload = _read_head(data)
        n = len(times) + 1 - keep
        if n <= 0:
            return None
        self._forget(key_bytes, times, segments, n)
        self._put(head_key, _head(latest, times[n:], segments[n:], encoded_key, payload))
        return times[n - 1]

    def _forget(self, key_bytes: bytes, times: list[int], segments: list[int], n: int) -> None:
        """Delete the segment entries of the ``n`` oldest versions in the directory."""
        live_from = self._live_from
        delete = self._delete
        for i in range(n):
            if segments[i] >= live_from:
                delete(_pack_prefix(_SEGMENTS, segments[i]) + key_bytes + _pack_u64(times[i]))

    def _trimmed(self, key_bytes: bytes, head: bytes) -> bytes:
        """``head`` without its versions up to the newest one whose segment has expired.

        They are all older than history retention: the expired one ended before the cutoff,
        and every older one ended before it began. Their entries still in live segments
        (versions an out-of-order write shortened) are deleted. Writes call this only when
        the oldest version's segment has expired, which bounds the directory cheaply.
        """
        latest, times, segments, encoded_key, payload = _read_head(head)
        live_from = self._live_from
        drop = max(i for i, segment in enumerate(segments) if segment < live_from) + 1
        self._forget(key_bytes, times, segments, drop)
        return _head(latest, times[drop:], segments[drop:], encoded_key, payload)

    def _mark(self, key_bytes: bytes, timestamp: int) -> None:
        """Note that ``key_bytes``'s latest version is a marker at ``timestamp``."""
        self._put(_pack_prefix(_EXPIRY, timestamp // self._si) + key_bytes, b"")

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
        bound = _pack_prefix(_EXPIRY, live_from)
        marked = [key[9:] for key, _ in self._keyspace.items(_EXPIRY, bound)]
        for key_bytes in marked:
            head_key = _LATEST + key_bytes
            data = self._get(head_key)
            if data is None:
                continue
            timestamp, n, key_length = _unpack_head(data)
            if (data[_HEAD_SIZE + 16 * n + key_length] in _MARKERS
                    and timestamp // self._si < live_from):
                self._delete(head_key)
        if marked:
            self._keyspace.delete_range(_EXPIRY, bound)
        self._keyspace.delete_range(_SEGMENTS, _pack_prefix(_SEGMENTS, live_from))
        self._live_from = live_from
        self._next_expiry = (live_from + 1) * self._si

    def _close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    # -- invariants ------------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every invariant of the layout (the tests call it after each operation).

        Heads: directory timestamps strictly ascending and older than the latest, each in a
        segment no earlier than that of its ``valid_to``; the encoded key decodes to a key
        that serializes to the head's key bytes; ``max_versions`` respected. Segment entries
        are exactly the directory's versions in live segments; none below the live segment is
        left. Every head whose latest version is a marker has its expiry entry and is not
        expired. The meta entry holds the observed stream time once there is one; the live
        segment is the cutoff's. The keyspace's own invariants hold.
        """
        self._keyspace._check()
        si = self._si
        live_from = self._live_from
        assert live_from == max(self._cutoff, 0) // si, (live_from, self._cutoff)
        assert self._next_expiry == (live_from + 1) * si, (self._next_expiry, live_from)
        expected: set[bytes] = set()
        marks: set[bytes] = set()
        entries: set[bytes] = set()
        found_marks: set[bytes] = set()
        meta = None
        for key, data in self._keyspace.items():
            prefix = key[:1]
            if prefix == _META:
                assert key == _META, key
                meta = _META_VALUE.unpack(data)
            elif prefix == _SEGMENTS:
                assert _unpack_u64(key, 1)[0] >= live_from, f"expired segment entry {key!r}"
                if data[0] not in _MARKERS:
                    decode(data)  # raises for bytes the codec did not write
                entries.add(key)
            elif prefix == _EXPIRY:
                assert data == b"", key
                found_marks.add(key)
            else:
                assert prefix == _LATEST, f"foreign key {key!r}"
                key_bytes = key[1:]
                timestamp, times, segments, encoded_key, payload = _read_head(data)
                assert self._key_bytes(decode(encoded_key)) == key_bytes, (key, encoded_key)
                ends = [*times, timestamp][1:]
                assert all(a < b for a, b in zip(times, ends, strict=True)), (key, times)
                assert all(segment >= end // si for segment, end in zip(segments, ends,
                                                                       strict=True)), key
                if self._max_versions is not None:
                    assert len(times) < self._max_versions, (key, times)
                for version, segment in zip(times, segments, strict=True):
                    if segment >= live_from:
                        expected.add(_entry_key(segment, key_bytes, version))
                if payload[0] in _MARKERS:
                    assert len(payload) == 1, key
                    assert timestamp // si >= live_from, f"{key!r}: expired marker kept"
                    marks.add(_pack_prefix(_EXPIRY, timestamp // si) + key_bytes)
                else:
                    decode(payload)
        assert entries == expected, (sorted(entries ^ expected), "segment entries")
        assert marks <= found_marks, (sorted(marks - found_marks), "expiry entries")
        if self._observed >= 0:
            assert meta == (self._observed, si), (meta, self._observed)
