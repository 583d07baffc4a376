"""The state codec: how persistent state writes a value that has no serde, and reads it back.

Stores, suppression buffers and durable outputs keep bytes on disk. A value with a serde is
written with it; a value without one (the common case in tests, and for aggregates such as
counts or tuples) is written with this codec, which is self-describing and reversible for the
types records usually carry:

=================  ========================================================================
type               encoding (after a one-byte tag)
=================  ========================================================================
``None``           nothing
``bool``           nothing (one tag for ``True``, one for ``False``)
``int``            8 bytes big-endian two's complement; beyond 64 bits, a 4-byte length and
                   the minimal two's-complement bytes
``float``          8 bytes IEEE 754 big-endian (NaN and infinities included)
``str``            a 4-byte length and UTF-8 (lone surrogates refused)
``bytes``          a 4-byte length and the bytes (``bytearray``/``memoryview`` read back as
                   ``bytes``)
``tuple``/``list`` a 4-byte count and the items
``dict``           a 4-byte count and the keys and values, in the dict's order
``Window``         start and end, 8 bytes each
``Windowed``       the key, then the window
=================  ========================================================================

Anything else (a user class, a set) raises :class:`StateCodecError` asking for a serde, when
it is written: never at restart. Reading bytes that were not written by this codec raises
:class:`StateCodecError` too, never returns a half-read value. Unlike pickle, reading runs no
code of the data's choosing.

>>> decode(encode(("EUR", 1.5, [1, None], {"k": b"v"})))
('EUR', 1.5, [1, None], {'k': b'v'})
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ..errors import StreamsError
from ..windows import Window, Windowed

__all__ = ("StateCodecError", "decode", "encode")

_LONG = struct.Struct(">q")
_DOUBLE = struct.Struct(">d")
_LENGTH = struct.Struct(">I")
_BOUNDS = struct.Struct(">qq")
_MAX_LENGTH = 2**32 - 1

_NONE, _TRUE, _FALSE = b"N", b"T", b"F"
_INT, _BIG_INT, _FLOAT, _STR, _BYTES = b"i", b"I", b"d", b"s", b"b"
_TUPLE, _LIST, _DICT, _WINDOW, _WINDOWED = b"t", b"l", b"m", b"W", b"w"


class StateCodecError(StreamsError, ValueError):
    """A value the state codec cannot write, or bytes it cannot read."""


def encode(value: Any) -> bytes:
    """The bytes of ``value`` (see the module docstring for the types and layouts).

    :raises StateCodecError: for a type the codec does not write, naming the type and asking
        for a serde.
    """
    kind = type(value)
    if kind is int and -(2**63) <= value < 2**63:  # fast paths, the same bytes as _write's
        return _INT + _LONG.pack(value)
    if kind is str and value.isascii():
        raw = value.encode("ascii")
        return _STR + _length(len(raw), "str") + raw
    out: list[bytes] = []
    _write(value, out.append)
    return b"".join(out)


def decode(data: bytes) -> Any:
    """The value :func:`encode` wrote as ``data``.

    :raises StateCodecError: for bytes that are not one whole encoded value.
    """
    view = data
    if type(view) is not bytes:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise StateCodecError(f"the state codec reads bytes, got {type(data).__name__}")
        view = bytes(data)
    try:
        value, end = _read(view, 0)
    except (IndexError, struct.error, UnicodeDecodeError, RecursionError, TypeError) as exc:
        raise StateCodecError(f"corrupt state: {len(view)} bytes that the state codec did not "
                              f"write ({type(exc).__name__}: {exc})") from exc
    if end != len(view):
        raise StateCodecError(f"corrupt state: {len(view) - end} bytes left after the value")
    return value


def _write(value: Any, put: Callable[[bytes], object]) -> None:
    kind = type(value)
    if value is None:
        put(_NONE)
    elif kind is bool:
        put(_TRUE if value else _FALSE)
    elif kind is int:
        if -(2**63) <= value < 2**63:
            put(_INT)
            put(_LONG.pack(value))
        else:
            raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
            put(_BIG_INT)
            put(_length(len(raw), "int"))
            put(raw)
    elif kind is float:
        put(_FLOAT)
        put(_DOUBLE.pack(value))
    elif kind is str:
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise StateCodecError(f"cannot write str {value[:40]!r}: {exc}") from exc
        put(_STR)
        put(_length(len(raw), "str"))
        put(raw)
    elif kind is bytes or kind is bytearray or kind is memoryview:
        raw = bytes(value)
        put(_BYTES)
        put(_length(len(raw), "bytes"))
        put(raw)
    elif kind is tuple or kind is list:
        put(_TUPLE if kind is tuple else _LIST)
        put(_length(len(value), kind.__name__))
        for item in value:
            _write(item, put)
    elif kind is dict:
        put(_DICT)
        put(_length(len(value), "dict"))
        for key, item in value.items():
            _write(key, put)
            _write(item, put)
    elif kind is Window:
        put(_WINDOW)
        put(_BOUNDS.pack(value.start, value.end))
    elif kind is Windowed:
        put(_WINDOWED)
        _write(value.key, put)
        put(_BOUNDS.pack(value.window.start, value.window.end))
    else:
        raise StateCodecError(
            f"cannot write a value of type {kind.__name__} to persistent state without a "
            f"serde: give the store one (Materialized(key_serde=..., value_serde=...), "
            f"Consumed, Grouped), or use None, bool, int, float, str, bytes, tuples, lists, "
            f"dicts or windowed keys")


def _length(n: int, what: str) -> bytes:
    if n > _MAX_LENGTH:
        raise StateCodecError(f"cannot write a {what} of {n} elements or bytes (max 2**32 - 1)")
    return _LENGTH.pack(n)


def _read(data: bytes, at: int) -> tuple[Any, int]:
    tag = data[at:at + 1]
    at += 1
    if tag == _STR:
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        end = at + n
        if end > len(data):
            raise IndexError("str runs past the end")
        return data[at:end].decode("utf-8"), end
    if tag == _INT:
        return _LONG.unpack_from(data, at)[0], at + 8
    if tag == _FLOAT:
        return _DOUBLE.unpack_from(data, at)[0], at + 8
    if tag == _NONE:
        return None, at
    if tag == _TRUE:
        return True, at
    if tag == _FALSE:
        return False, at
    if tag == _BYTES or tag == _BIG_INT:
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        end = at + n
        if end > len(data):
            raise IndexError("bytes run past the end")
        raw = data[at:end]
        if tag == _BYTES:
            return raw, end
        value = int.from_bytes(raw, "big", signed=True)
        if -(2**63) <= value < 2**63 or n != (value.bit_length() + 8) // 8:
            raise IndexError("a big int written in a form the codec never writes")
        return value, end
    if tag == _TUPLE or tag == _LIST:
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        items = []
        for _ in range(n):
            item, at = _read(data, at)
            items.append(item)
        return (tuple(items) if tag == _TUPLE else items), at
    if tag == _DICT:
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        out = {}
        for _ in range(n):
            key, at = _read(data, at)
            out[key], at = _read(data, at)
        return out, at
    if tag == _WINDOW:
        start, end = _BOUNDS.unpack_from(data, at)
        return Window(start, end), at + 16
    if tag == _WINDOWED:
        key, at = _read(data, at)
        start, end = _BOUNDS.unpack_from(data, at)
        return Windowed(key, Window(start, end)), at + 16
    raise IndexError(f"unknown tag {tag!r} at byte {at - 1}")
