r"""The bytes of keys and values that have no serde.

**Keys without a serde** (:func:`fallback_key_bytes`). Stores and suppression buffers order
keys by their bytes, so a key that no serde describes still gets deterministic bytes, the same
in every process (no pickle, nothing that depends on ``PYTHONHASHSEED``):

======================  ==============================================================
``str``                 UTF-8, exactly as ``Serdes.string()`` (so the same order)
``bytes``               as is, as ``Serdes.bytes()``
``int``                 8 bytes big-endian two's complement, exactly as ``Serdes.long()``
                        (so the same order: negative keys after positive ones, as bytes
                        compare unsigned); outside ``[-2**63, 2**63)`` a :class:`SerdeError`
``float``               8 bytes big-endian IEEE 754, exactly as ``Serdes.double()``
``bool``                one byte, ``0x00``/``0x01`` (Kafka's boolean serializer)
``None``                no bytes
``Windowed``            the key's bytes + start (8 bytes big-endian): Kafka's
                        time-windowed layout, as ``Serdes.time_windowed``
``tuple``               each element with a one-byte type tag, see below
anything else           :class:`SerdeError` naming the type and asking for a key serde
======================  ==============================================================

A tuple's bytes are its elements' encodings, one after the other. Each element starts with a
tag byte, ordered ``None (0x01) < False (0x02) < True (0x03) < int (0x04) < float (0x05) <
bytes (0x06) < str (0x07) < tuple (0x08)``, followed by:

- int: 8 bytes big-endian of ``value + 2**63`` (byte order is numeric order);
- float: the 8 IEEE 754 bytes with the sign bit flipped, all bits flipped for negative
  numbers (byte order is numeric order; ``-0.0`` before ``0.0``, NaN at the ends);
- bytes, str (UTF-8): the bytes with every ``0x00`` written as ``0x00 0xFF``, then ``0x00``;
- tuple: its elements, then ``0x00``;
- None, False, True: nothing more.

No two tuples share their bytes (keys of different top-level types may, as with Kafka's
untagged formats: ``"a"`` and ``b"a"``), and tuples of the same shape (each position always of
one type) order exactly as Python orders them; elements of different types order by tag, and a
tuple comes before any longer tuple it begins. Named tuples are tuples here.
Ints and floats inside tuples use the numeric layouts above, not the bare-key ones (those are
Kafka's, and Kafka has no tuples). Keys that Python finds equal across types (``1``, ``1.0``,
``True``) have different bytes, so they are different keys, and ``"a"`` and ``b"a"`` are one
key (:mod:`topology._key_identity`): give such keys one type.

**Values without a serde** (:func:`fallback_value_bytes`) are only measured, for a suppression
with a ``max_bytes`` limit: the types above have the same bytes as keys, ``dict`` and ``list``
are compact JSON with sorted keys, anything else is a :class:`SerdeError` asking for a value
serde.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ._builtin_serdes import _PACK_DOUBLE, _PACK_LONG, _to_json
from ._serde_errors import SerdeError, _describe, _reason
from ._windowed_keys import _time_windowed_writer
from .windows import Windowed

_KEY_TYPES = ("str, bytes, int, float, bool, None, Windowed, or a tuple of str, bytes, int, "
              "float, bool, None and such tuples")


def _no_serde(value: object, role: str, options: str) -> SerdeError:
    return SerdeError(
        f"a {role} of type {type(value).__qualname__} has no {role} serde, and without one "
        f"a {role} must be {options}; give a {role} serde, e.g. "
        f"Consumed({role}_serde=...), Grouped({role}_serde=...) or "
        f"Materialized({role}_serde=...) (got {_describe(value)})"
    )


def _long_bytes(value: int) -> bytes:
    if -_INT_BIAS <= value < _INT_BIAS:
        return _PACK_LONG(value)
    raise SerdeError(f"{_describe(value)} is outside the range of Kafka's long "
                     "[-2**63, 2**63); give a serde for it")


def _str_bytes(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SerdeError(f"{_describe(value)} cannot be written as UTF-8: {_reason(exc)}"
                         ) from exc


def _bool_bytes(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def _none_bytes(value: None) -> bytes:
    return b""


def _double_bytes(value: float) -> bytes:
    return _PACK_DOUBLE(value)


def _tuple_bytes(value: tuple[Any, ...]) -> bytes:
    out = bytearray()
    _write_elements(out, value)
    return bytes(out)


_TAG_END = 0x00
_TAG_NONE, _TAG_FALSE, _TAG_TRUE, _TAG_INT, _TAG_FLOAT = 0x01, 0x02, 0x03, 0x04, 0x05
_TAG_BYTES, _TAG_STR, _TAG_TUPLE = 0x06, 0x07, 0x08
_INT_BIAS = 2**63
_PACK_UNSIGNED = struct.Struct(">Q").pack
_UNPACK_UNSIGNED = struct.Struct(">Q").unpack
_ALL_BITS = 2**64 - 1
_SIGN_BIT = 2**63


def _write_escaped(out: bytearray, tag: int, data: bytes) -> None:
    out.append(tag)
    out += data.replace(b"\x00", b"\x00\xff")
    out.append(_TAG_END)


def _write_elements(out: bytearray, items: tuple[Any, ...]) -> None:
    """Append the tagged encoding of each of ``items`` to ``out`` (the tuple layout)."""
    for item in items:
        if item is None:
            out.append(_TAG_NONE)
        elif isinstance(item, bool):
            out.append(_TAG_TRUE if item else _TAG_FALSE)
        elif isinstance(item, int):
            if not -_INT_BIAS <= item < _INT_BIAS:
                _long_bytes(item)  # raises the out-of-range error
            out.append(_TAG_INT)
            out += _PACK_UNSIGNED(item + _INT_BIAS)
        elif isinstance(item, float):
            bits: int = _UNPACK_UNSIGNED(_PACK_DOUBLE(item))[0]
            out.append(_TAG_FLOAT)
            out += _PACK_UNSIGNED(bits ^ _ALL_BITS if bits & _SIGN_BIT else bits | _SIGN_BIT)
        elif isinstance(item, bytes):
            _write_escaped(out, _TAG_BYTES, item)
        elif isinstance(item, str):
            _write_escaped(out, _TAG_STR, _str_bytes(item))
        elif isinstance(item, tuple):
            out.append(_TAG_TUPLE)
            _write_elements(out, item)
            out.append(_TAG_END)
        else:
            raise SerdeError(
                f"a tuple element of type {type(item).__qualname__} has no byte encoding "
                f"without a serde: tuple elements must be str, bytes, int, float, bool, None "
                f"or tuples of these; give a serde (got {_describe(item)})")


_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    str: _str_bytes,
    bytes: bytes,
    int: _long_bytes,
    bool: _bool_bytes,
    float: _double_bytes,
    type(None): _none_bytes,
    tuple: _tuple_bytes,
}


def _encoder_of(value: object) -> Callable[[Any], bytes] | None:
    """The encoder of ``value``'s type (subclasses included), or ``None`` if it has none."""
    encoder = _ENCODERS.get(type(value))
    if encoder is not None:
        return encoder
    for base in (int, float, str, bytes, tuple):
        if isinstance(value, base):
            return _ENCODERS[base]
    return None


def fallback_key_bytes(key: Any) -> bytes:
    """Return the bytes of a key that has no serde, as the module docstring's table says.

    str as UTF-8 (as ``Serdes.string()``), int as Kafka's long (as ``Serdes.long()``),
    float as a double, bytes as is, bool as one byte, None as no bytes, tuples tagged and
    order-preserving, :class:`Windowed` as Kafka's time-windowed layout. The bytes are the
    same in every process. Runtime complexity: O(size of the key).

    >>> fallback_key_bytes("a"), fallback_key_bytes(-1).hex()
    (b'a', 'ffffffffffffffff')
    >>> fallback_key_bytes(("a", 1)).hex()
    '076100048000000000000001'

    :raises SerdeError: for a key of another type (naming it and asking for a key serde),
        an int outside ``[-2**63, 2**63)``, or a str that is not valid Unicode.
    """
    cls = type(key)
    if cls is str:
        try:
            data: bytes = key.encode("utf-8")
        except UnicodeEncodeError:
            return _str_bytes(key)  # raises the SerdeError
        return data
    if cls is int and -_INT_BIAS <= key < _INT_BIAS:
        return _PACK_LONG(key)
    encoder = _ENCODERS.get(cls) or _encoder_of(key)
    if encoder is None:
        raise _no_serde(key, "key", _KEY_TYPES)
    return encoder(key)


_ENCODERS[Windowed] = _time_windowed_writer(fallback_key_bytes)


def fallback_value_bytes(value: Any) -> bytes:
    """Return the bytes of a value that has no serde, to measure it for a ``max_bytes`` limit.

    The types of :func:`fallback_key_bytes` have the same bytes; ``dict`` and ``list`` are
    compact JSON with sorted keys. Runtime complexity: O(size of the value).

    >>> fallback_value_bytes({"b": 1, "a": [2]})
    b'{"a":[2],"b":1}'

    :raises SerdeError: for a value of another type, or a dict or list that JSON cannot
        write, asking for a value serde.
    """
    if type(value) is int and -_INT_BIAS <= value < _INT_BIAS:  # the common case first
        return _PACK_LONG(value)
    encoder = _encoder_of(value)
    if encoder is not None:
        return encoder(value)
    if isinstance(value, dict | list):
        try:
            return _to_json(value)
        except (TypeError, ValueError) as exc:
            raise SerdeError(
                f"a value {_describe(value)} has no value serde and JSON cannot write it "
                f"({_reason(exc)}); give a value serde, e.g. Materialized(value_serde=...)"
            ) from exc
    raise _no_serde(value, "value", _KEY_TYPES + ", dict or list (as JSON)")
