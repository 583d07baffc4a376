"""Fixed-width integer encodings whose byte order is their numeric order.

RocksDB (raw mode) orders keys as unsigned bytes, so a key layout that sorts by time or by a
counter must encode the number so that comparing the bytes compares the numbers: big-endian,
and for signed numbers offset by 2**63 (plain two's complement would put negative numbers after
positive ones). Nothing here depends on RocksDB; the module could move to ``topology.state``
for every backend to share.

>>> encode_int64(-1) < encode_int64(0) < encode_int64(1)
True
>>> decode_int64(encode_int64(-(2**63))), decode_uint64(encode_uint64(7))
(-9223372036854775808, 7)
"""

from __future__ import annotations

import struct

__all__ = ("decode_int64", "decode_uint64", "encode_int64", "encode_uint64", "prefix_end")

_U64 = struct.Struct(">Q")
_pack_u64 = _U64.pack
_unpack_u64 = _U64.unpack
_OFFSET = 2**63


def encode_int64(value: int) -> bytes:
    """Encode a signed 64-bit integer (e.g. a timestamp in ms) in 8 bytes that sort numerically.

    Runtime complexity: O(1).

    :raises TypeError: ``value`` is not an ``int``.
    :raises ValueError: ``value`` is outside ``[-2**63, 2**63)``.
    """
    try:
        return _pack_u64(value + _OFFSET)
    except (struct.error, TypeError):
        _refuse(value, -_OFFSET, _OFFSET)
        raise


def decode_int64(data: bytes) -> int:
    """Decode 8 bytes written by :func:`encode_int64`.

    Runtime complexity: O(1).

    :raises ValueError: ``data`` is not 8 bytes long.
    """
    try:
        return int(_unpack_u64(data)[0]) - _OFFSET
    except struct.error:
        raise ValueError(f"an int64 key part is 8 bytes, got {len(data)}") from None


def encode_uint64(value: int) -> bytes:
    """Encode an unsigned 64-bit integer (a counter, an offset) in 8 big-endian bytes.

    Runtime complexity: O(1).

    :raises TypeError: ``value`` is not an ``int``.
    :raises ValueError: ``value`` is outside ``[0, 2**64)``.
    """
    try:
        return _pack_u64(value)
    except (struct.error, TypeError):
        _refuse(value, 0, 2**64)
        raise


def decode_uint64(data: bytes) -> int:
    """Decode 8 bytes written by :func:`encode_uint64`.

    Runtime complexity: O(1).

    :raises ValueError: ``data`` is not 8 bytes long.
    """
    try:
        return int(_unpack_u64(data)[0])
    except struct.error:
        raise ValueError(f"a uint64 key part is 8 bytes, got {len(data)}") from None


def prefix_end(prefix: bytes) -> bytes | None:
    r"""The smallest key greater than every key that starts with ``prefix``.

    ``items(prefix, prefix_end(prefix))`` then iterates exactly the keys with that prefix;
    ``None`` (an open upper bound) when no such key exists (``prefix`` empty or all ``0xff``).

    Runtime complexity: O(len(prefix)).

    >>> prefix_end(b"ab"), prefix_end(b"a\xff"), prefix_end(b"\xff")
    (b'ac', b'b', None)
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def _refuse(value: object, low: int, high: int) -> None:
    """Raise the error that explains why ``value`` cannot be packed into ``[low, high)``."""
    if not isinstance(value, int):
        raise TypeError(f"expected an int, got {type(value).__name__}") from None
    if not low <= value < high:
        raise ValueError(f"{value} is outside [{low}, {high})") from None
