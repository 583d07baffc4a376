"""The entry a RocksDB store writes for a key: timestamp, value and original key, in bytes.

Layout: the record's timestamp (ms, 8 bytes signed big-endian), the length of the encoded value
(4 bytes big-endian), then the value and the original key, each in the state codec
(:mod:`topology.state.codec`). A lookup decodes the value alone; a scan decodes the key too,
so it returns the original key objects without a key deserializer.

An entry that surely encodes (:func:`holds`) may be held unencoded by its keyspace until the
commit (``Keyspace.hold``) as the tuple ``(value, key, timestamp)``; :func:`pack_held` writes
it then.
"""

from __future__ import annotations

import struct
from typing import Any

from ..codec import StateCodecError, decode, encode, encodes_surely

__all__ = ("holds", "pack_entry", "pack_held", "unpack_entry", "unpack_value",
           "unpack_value_only")

_HEADER = struct.Struct(">qI")
"""Timestamp (ms, signed) and length of the encoded value, at the start of every value."""
_HEADER_SIZE = _HEADER.size
_SIZE = struct.Struct(">I")
"""The length of the encoded value alone (at byte 8), for reads that skip the timestamp."""


def pack_entry(value: Any, key: Any, timestamp: int) -> bytes:
    """The stored bytes of ``value`` for ``key`` at ``timestamp`` (ms): header, value, key.

    Runtime complexity: O(size of the value and the key).

    :raises StateCodecError: the value or the key is of a type the state codec does not
        write, or the timestamp is outside ``[-2**63, 2**63)``.
    """
    data = encode(value)
    try:
        header = _HEADER.pack(timestamp, len(data))
    except struct.error as exc:
        raise StateCodecError(f"cannot write timestamp {timestamp!r}: {exc}") from exc
    return header + data + encode(key)


def pack_held(entry: tuple[Any, Any, int]) -> bytes:
    """:func:`pack_entry` of a held ``(value, key, timestamp)`` (see :func:`holds`)."""
    return pack_entry(*entry)


def holds(value: Any, key: Any, timestamp: int) -> bool:
    """Whether ``pack_entry(value, key, timestamp)`` cannot fail, told without encoding.

    A store holds such an entry unencoded (``Keyspace.put_held``) and the keyspace encodes it
    once, at the commit; any other entry is encoded at once, so that a value the state codec
    refuses raises while the record that made it is processed.
    """
    return (encodes_surely(value) and encodes_surely(key)
            and -(2**63) <= timestamp < 2**63)


def unpack_value(raw: bytes) -> tuple[Any, int]:
    """``(value, timestamp)`` of bytes written by :func:`pack_entry` (the key is not decoded).

    Runtime complexity: O(size of the value).

    :raises StateCodecError: ``raw`` was not written by :func:`pack_entry`.
    """
    try:
        timestamp, size = _HEADER.unpack_from(raw)
    except struct.error as exc:
        raise StateCodecError(f"corrupt state: a store entry of {len(raw)} bytes") from exc
    return decode(raw[_HEADER_SIZE:_HEADER_SIZE + size]), timestamp


def unpack_value_only(raw: bytes) -> Any:
    """The value of bytes written by :func:`pack_entry` (neither timestamp nor key decoded).

    Runtime complexity: O(size of the value).

    :raises StateCodecError: ``raw`` was not written by :func:`pack_entry`.
    """
    try:
        size = _SIZE.unpack_from(raw, 8)[0]
    except struct.error as exc:
        raise StateCodecError(f"corrupt state: a store entry of {len(raw)} bytes") from exc
    return decode(raw[_HEADER_SIZE:_HEADER_SIZE + size])


def unpack_entry(raw: bytes) -> tuple[Any, Any, int]:
    """``(key, value, timestamp)`` of bytes written by :func:`pack_entry`.

    Runtime complexity: O(size of the value and the key).

    :raises StateCodecError: ``raw`` was not written by :func:`pack_entry`.
    """
    try:
        timestamp, size = _HEADER.unpack_from(raw)
    except struct.error as exc:
        raise StateCodecError(f"corrupt state: a store entry of {len(raw)} bytes") from exc
    end = _HEADER_SIZE + size
    return decode(raw[end:]), decode(raw[_HEADER_SIZE:end]), timestamp
