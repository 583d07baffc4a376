"""The on-disk format of a spilled suppression buffer: order keys and entry records.

**Order key** (:func:`order_key`): ``b"o" | time | key bytes``, ``time`` 8 bytes big-endian
with the sign bit flipped, so byte order is ``(buffer time, key bytes)`` order, numeric for
the time and unsigned for the key. When a key's buffer time is a function of the key (final
results), the order key's value is the entry's record; otherwise it is empty and the record
is under ``b"e" | key bytes`` (:data:`ENTRY_PREFIX`).

**Checkpoint** (:meth:`~suppress.spill.SpillingBuffer.checkpoint`): a buffer kept across
restarts also writes its memory tier, ``b"m" | key bytes -> record`` (:data:`MEMORY_PREFIX`),
and its disk tier's figures under :data:`STATS_KEY` (:func:`pack_stats`), so that the store
alone holds the whole buffer, each entry once.

**Entry record** (:class:`RecordCodec`), version 1, integers big-endian and signed::

    header   version (1) | length of the stable part (4) | buffer time (8) | size (8)
    stable   value(key) | value(prior) | value(prior's serialized bytes, or None)
    latest   timestamp (8) | offset (8) | partition (4) | value(new) | value(old)
             | topic: length (4) + UTF-8 | header count (4)
             | per header: key length (4) + UTF-8, value length (4, -1 for None) + bytes

The *stable* part is written when a key enters the buffer and copied as is when the key is
updated, which rewrites only the header's size and the *latest* part. ``size`` is Kafka's
size estimate of the entry when the buffer tracks bytes, else 0.

A *value* is one tag byte and its data: ``N`` (``None``), ``i`` (an ``int`` in 64 bits: 8
bytes), ``s`` (a ``str``: length (4) + UTF-8, lone surrogates kept), ``b`` (``bytes``: length
(4) + bytes), or ``c`` (anything else: length (4) + the injected codec's bytes). The first
four cover the common keys and aggregates without a call to the codec; ``topology`` injects
its state codec, which reads back the objects it wrote and runs no code of the data's choosing.

Records that this version did not write are refused with :class:`SpillFormatError`, never
half-read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from .entry import BufferedEntry, RecordContext
from .errors import SuppressError

__all__ = ("ENTRY_END", "ENTRY_PREFIX", "FORMAT_VERSION", "KEYED", "MEMORY_END",
           "MEMORY_PREFIX", "ORDER_END", "ORDER_KEY_PREFIX_LEN", "ORDER_START", "STATS_KEY",
           "TRACKED", "RecordCodec", "SpillFormatError", "order_key", "pack_stats",
           "record_size", "time_of_order", "unpack_stats")

FORMAT_VERSION: Final = 1
"""The record format this module writes and reads."""

ENTRY_PREFIX: Final = b"e"
"""First byte of an entry key: ``b"e" + key bytes`` (the two-area layout)."""
ENTRY_END: Final = b"f"
MEMORY_PREFIX: Final = b"m"
"""First byte of a checkpointed memory-tier entry: ``b"m" + key bytes -> record``."""
MEMORY_END: Final = b"n"
STATS_KEY: Final = b"s"
"""The disk tier's figures as of the last checkpoint (see :func:`pack_stats`)."""
ORDER_START: Final = b"o"
"""First byte of an order key; every order key is in ``[ORDER_START, ORDER_END)``."""
ORDER_END: Final = b"p"
ORDER_KEY_PREFIX_LEN: Final = 9
"""Bytes before the key bytes in an order key."""

_HEADER: Final = struct.Struct(">BIqq")  # version, length of the stable part, time, size
HEADER_LEN: Final = _HEADER.size
_CONTEXT: Final = struct.Struct(">qqi")  # timestamp, offset, partition
_CONTEXT_INTS: Final = struct.Struct(">qqiBqBq")  # ... then value(new), value(old): two ints
_INT_TAG: Final = 0x69  # b"i"
_context = RecordContext._make
_TIME: Final = struct.Struct(">Q")
_SIGN: Final = 1 << 63
_LONG: Final = struct.Struct(">q")
_LEN: Final = struct.Struct(">I")
_SIGNED_LEN: Final = struct.Struct(">i")
_NO_HEADERS: Final = _LEN.pack(0)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_STATS: Final = struct.Struct(">BBqq")  # version, flags, disk count, disk bytes
KEYED: Final = 1
"""Stats flag: the one-area layout (buffer times a function of the key)."""
TRACKED: Final = 2
"""Stats flag: records carry sizes and their prior's bytes."""


class SpillFormatError(SuppressError):
    """A spill record this version did not write, or a corrupt one."""


def order_key(time: int, key_bytes: bytes) -> bytes:
    """The order key of an entry: sorts as ``(time, key_bytes)``.

    ``time`` (ms) is 8 bytes big-endian with the sign bit flipped, so negative times sort
    first.

    >>> order_key(-1, b"k") < order_key(0, b"") < order_key(0, b"a") < order_key(256, b"")
    True
    """
    return ORDER_START + _TIME.pack(time + _SIGN) + key_bytes


def time_of_order(order: bytes) -> int:
    """The buffer time (ms) of an order key.

    >>> time_of_order(order_key(-5, b"k"))
    -5
    """
    value: int = _TIME.unpack_from(order, 1)[0]
    return value - _SIGN


def pack_stats(flags: int, count: int, size: int) -> bytes:
    """The value of :data:`STATS_KEY`: layout ``flags``, disk entries and their bytes.

    >>> unpack_stats(pack_stats(KEYED | TRACKED, 3, 120))
    (3, 3, 120)
    """
    return _STATS.pack(FORMAT_VERSION, flags, count, size)


def unpack_stats(data: bytes) -> tuple[int, int, int]:
    """``(flags, count, bytes)`` from a :data:`STATS_KEY` value.

    :raises SpillFormatError: for stats this version did not write.
    """
    try:
        version, flags, count, size = _STATS.unpack(data)
    except struct.error as exc:
        raise SpillFormatError(f"spill stats of {len(data)} bytes, not {_STATS.size}") from exc
    if version != FORMAT_VERSION:
        raise SpillFormatError(f"spill stats of format version {version}; this version reads "
                               f"version {FORMAT_VERSION} only")
    return flags, count, size


def record_size(record: bytes) -> int:
    """The size field (bytes, 0 when untracked) of a record.

    :raises SpillFormatError: for a record of another version.
    """
    version, _stable, _time, size = _unpack_header(record)
    return size


def _unpack_header(record: bytes) -> tuple[int, int, int, int]:
    try:
        header: tuple[int, int, int, int] = _HEADER.unpack_from(record)
    except struct.error as exc:
        raise SpillFormatError(f"a spill record of {len(record)} bytes, too short") from exc
    if header[0] != FORMAT_VERSION:
        raise SpillFormatError(
            f"a spill record of format version {header[0]}; this version reads version "
            f"{FORMAT_VERSION} only: the spill store was not written by this version")
    return header


class RecordCodec:
    """Writes and reads entry records, with ``encode``/``decode`` for unusual values.

    :param encode: bytes of an object that is not ``None``, an ``int`` in 64 bits, a
        ``str`` or ``bytes``; raises for one it cannot write.
    :param decode: the object ``encode`` wrote.

    >>> import ast
    >>> codec = RecordCodec(lambda v: repr(v).encode(), lambda b: ast.literal_eval(b.decode()))
    >>> entry = BufferedEntry(10, b"k", ("k", 1), 2, 1, None, RecordContext(7, 3, "in"))
    >>> back = codec.entry(b"k", codec.record(entry, None))
    >>> (back.time, back.key, back.new, back.old, back.prior, back.context.offset)
    (10, ('k', 1), 2, 1, None, 3)
    """

    __slots__ = ("_encode", "_decode", "_tails")

    def __init__(self, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any]) -> None:
        self._encode = encode
        self._decode = decode
        self._tails: dict[str, bytes] = {}  # topic -> the end of a latest part without headers

    # -- writing -------------------------------------------------------------------------------

    def record(self, entry: BufferedEntry, prior_bytes: bytes | None) -> bytes:
        """The record of ``entry``; ``prior_bytes``: its prior's serialized bytes, if tracked.

        :raises Exception: whatever ``encode`` raises for a value it cannot write.
        """
        return self.assemble(entry.time, entry.key, entry.prior, prior_bytes, entry.size,
                             self.latest(entry.new, entry.old, entry.context))

    def assemble(self, time: int, key: Any, prior: Any, prior_bytes: bytes | None, size: int,
                 latest: bytes) -> bytes:
        """A record from its fields and an encoded *latest* part (see :meth:`latest`).

        :raises Exception: whatever ``encode`` raises for a key or prior it cannot write.
        """
        value = self._value
        stable = value(key) + value(prior) + value(prior_bytes)
        return _HEADER.pack(FORMAT_VERSION, len(stable), time, size) + stable + latest

    def latest(self, new: Any, old: Any, context: RecordContext) -> bytes:
        """The *latest* part of a record: the change and its context.

        Runtime complexity: O(size of the values); two ints and no headers (counts, sums)
        take one ``struct`` call.
        """
        timestamp, offset, topic, partition, headers = context
        if headers:
            tail = _topic(topic) + _headers(headers)
        else:
            tail = self._tails.get(topic) or self._tail(topic)
        if type(new) is int and type(old) is int:
            try:
                return _CONTEXT_INTS.pack(timestamp, offset, partition, _INT_TAG, new, _INT_TAG,
                                          old) + tail
            except struct.error:
                pass  # beyond 64 bits: the general form below
        value = self._value
        return _CONTEXT.pack(timestamp, offset, partition) + value(new) + value(old) + tail

    def _tail(self, topic: str) -> bytes:
        tail = _topic(topic) + _NO_HEADERS
        if len(self._tails) < 64:  # a task reads few topics
            self._tails[topic] = tail
        return tail

    def updated(self, record: bytes, latest: bytes, size: int | None) -> bytes:
        """``record`` with another *latest* part (see :meth:`latest`), and size unless ``None``.

        :raises SpillFormatError: for a record of another version.
        """
        version, stable_len, time, _size = _HEADER.unpack_from(record)
        if version != FORMAT_VERSION:
            _unpack_header(record)  # raises the error that says why
        stable_end = HEADER_LEN + stable_len
        if size is None:
            return record[:stable_end] + latest
        return (_HEADER.pack(FORMAT_VERSION, stable_len, time, size)
                + record[HEADER_LEN:stable_end] + latest)

    def _value(self, value: Any) -> bytes:
        kind = type(value)
        if value is None:
            return b"N"
        if kind is int and _INT64_MIN <= value <= _INT64_MAX:
            return b"i" + _LONG.pack(value)
        if kind is str:
            data: bytes = value.encode("utf-8", "surrogatepass")  # any str, read back exactly
            return b"s" + _LEN.pack(len(data)) + data
        if kind is bytes:
            raw: bytes = value
            return b"b" + _LEN.pack(len(raw)) + raw
        data = self._encode(value)
        return b"c" + _LEN.pack(len(data)) + data

    # -- reading -------------------------------------------------------------------------------

    def prior_bytes(self, record: bytes) -> bytes | None:
        """The prior's serialized bytes kept in ``record`` (``None`` when untracked)."""
        _version, stable_len, _time, _size = _unpack_header(record)
        try:
            at = self._skip(record, HEADER_LEN)
            at = self._skip(record, at)
            prior_bytes, at = self._read(record, at)
        except (IndexError, struct.error, UnicodeDecodeError) as exc:
            raise _corrupt(record, exc) from exc
        return None if prior_bytes is None else bytes(prior_bytes)

    def entry(self, key_bytes: bytes, record: bytes) -> BufferedEntry:
        """The entry ``record`` holds (``key_bytes``: its key's bytes).

        :raises SpillFormatError: for a record of another version or a corrupt one.
        """
        _version, stable_len, time, size = _unpack_header(record)
        read = self._read
        try:
            key, at = read(record, HEADER_LEN)
            prior, at = read(record, at)
            at = self._skip(record, at)
            if at != HEADER_LEN + stable_len:
                raise IndexError("the stable part's length disagrees with its contents")
            if record[at + 20] == _INT_TAG and record[at + 29] == _INT_TAG:  # two ints
                timestamp, offset, partition, _, new, _, old = _CONTEXT_INTS.unpack_from(
                    record, at)
                at += _CONTEXT_INTS.size
            else:
                timestamp, offset, partition = _CONTEXT.unpack_from(record, at)
                new, at = read(record, at + _CONTEXT.size)
                old, at = read(record, at)
            (n,) = _LEN.unpack_from(record, at)
            topic = record[at + 4:at + 4 + n].decode("utf-8", "surrogatepass")
            headers, at = _read_headers(record, at + 4 + n)
            if at != len(record):
                raise IndexError(f"{len(record) - at} bytes left after the record")
        except (IndexError, struct.error, UnicodeDecodeError) as exc:
            raise _corrupt(record, exc) from exc
        entry = BufferedEntry(time, key_bytes, key, new, old, prior,
                              _context((timestamp, offset, topic, partition, headers)))
        entry.size = size
        return entry

    def _read(self, data: bytes, at: int) -> tuple[Any, int]:
        tag = data[at]
        if tag == 0x69:  # i
            return _LONG.unpack_from(data, at + 1)[0], at + 9
        if tag == 0x4E:  # N
            return None, at + 1
        (n,) = _LEN.unpack_from(data, at + 1)
        end = at + 5 + n
        if end > len(data):
            raise IndexError("a value runs past the end of the record")
        if tag == 0x73:  # s
            return data[at + 5:end].decode("utf-8", "surrogatepass"), end
        if tag == 0x62:  # b
            return data[at + 5:end], end
        if tag == 0x63:  # c
            return self._decode(data[at + 5:end]), end
        raise IndexError(f"unknown value tag {tag:#x} at byte {at}")

    def _skip(self, data: bytes, at: int) -> int:
        tag = data[at]
        if tag == 0x69:
            return at + 9
        if tag == 0x4E:
            return at + 1
        (n,) = _LEN.unpack_from(data, at + 1)
        end: int = at + 5 + n
        return end


def _topic(topic: str) -> bytes:
    data = topic.encode("utf-8", "surrogatepass")
    return _LEN.pack(len(data)) + data


def _headers(headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
    out = [_LEN.pack(len(headers))]
    for key, value in headers:
        data = key.encode("utf-8", "surrogatepass")
        out.append(_LEN.pack(len(data)))
        out.append(data)
        if value is None:
            out.append(_SIGNED_LEN.pack(-1))
        else:
            out.append(_SIGNED_LEN.pack(len(value)))
            out.append(bytes(value))
    return b"".join(out)


def _read_headers(data: bytes, at: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    (count,) = _LEN.unpack_from(data, at)
    at += 4
    if not count:
        return (), at
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        (n,) = _LEN.unpack_from(data, at)
        key = data[at + 4:at + 4 + n].decode("utf-8", "surrogatepass")
        at += 4 + n
        (m,) = _SIGNED_LEN.unpack_from(data, at)
        at += 4
        if m < 0:
            headers.append((key, None))
        else:
            if at + m > len(data):
                raise IndexError("a header value runs past the end of the record")
            headers.append((key, data[at:at + m]))
            at += m
    return tuple(headers), at


def _corrupt(record: bytes, exc: Exception) -> SpillFormatError:
    return SpillFormatError(f"a corrupt spill record of {len(record)} bytes "
                            f"({type(exc).__name__}: {exc})")
