r"""Serializers and deserializers with Kafka's byte formats.

A :class:`Serde` turns values into ``bytes`` and back; ``None`` (a tombstone) stays ``None``
both ways. :class:`Serdes` gives the built-in ones.

>>> Serdes.long().serialize(1)
b'\x00\x00\x00\x00\x00\x00\x00\x01'
>>> from topology.windows import Window, Windowed
>>> s = Serdes.time_windowed(Serdes.string(), 10)
>>> s.deserialize(s.serialize(Windowed("a", Window(0, 10))))
Windowed(key='a', window=Window(start=0, end=10))
"""

from __future__ import annotations

import json
import pickle
import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar, final

from .errors import TopologyError
from .windows import Window, Windowed

__all__ = ("Serde", "SerdeError", "Serdes")

T = TypeVar("T")
LONG_MAX = 2**63 - 1


class SerdeError(TopologyError):
    """A value that its serde cannot write, or bytes it cannot read."""


@final
class Serde(Generic[T]):
    """A named pair of functions ``T -> bytes`` and ``bytes -> T``; ``None`` passes through.

    :raises SerdeError: from :meth:`serialize`/:meth:`deserialize` for values or bytes of the
        wrong shape, naming the serde and the value's type.
    """

    __slots__ = ("name", "_to_bytes", "_from_bytes")

    def __init__(self, name: str, to_bytes: Callable[[T], bytes],
                 from_bytes: Callable[[bytes], T]) -> None:
        self.name = name
        self._to_bytes = to_bytes
        self._from_bytes = from_bytes

    def serialize(self, value: T | None) -> bytes | None:
        """Bytes of ``value`` (``None`` for ``None``)."""
        if value is None:
            return None
        try:
            return self._to_bytes(value)
        except (TypeError, ValueError, struct.error, AttributeError, OverflowError,
                pickle.PicklingError) as exc:
            raise SerdeError(
                f"serde {self.name} cannot serialize {type(value).__name__} {value!r}: {exc}"
            ) from exc

    def deserialize(self, data: bytes | None) -> T | None:
        """The value in ``data`` (``None`` for ``None``)."""
        if data is None:
            return None
        try:
            return self._from_bytes(data)
        except (TypeError, ValueError, struct.error, UnicodeDecodeError, EOFError,
                pickle.UnpicklingError) as exc:
            raise SerdeError(f"serde {self.name} cannot deserialize {data!r}: {exc}") from exc

    def __repr__(self) -> str:
        return f"Serde({self.name})"


def _int_packer(fmt: str, what: str) -> Callable[[int], bytes]:
    packer = struct.Struct(fmt).pack

    def pack(value: int) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{what} needs an int")
        return packer(value)

    return pack


def _int_unpacker(fmt: str) -> Callable[[bytes], int]:
    unpack = struct.Struct(fmt).unpack

    def read(data: bytes) -> int:
        return unpack(data)[0]

    return read


def _to_str_bytes(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError("string serde needs a str")
    return value.encode("utf-8")


def _to_raw_bytes(value: bytes) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("bytes serde needs bytes")
    return bytes(value)


def _to_double(value: float) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("double serde needs a float")
    return struct.pack(">d", value)


def _to_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


_STRING: Serde[str] = Serde("string", _to_str_bytes, lambda b: bytes(b).decode("utf-8"))
_LONG: Serde[int] = Serde("long", _int_packer(">q", "long serde"), _int_unpacker(">q"))
_INTEGER: Serde[int] = Serde("integer", _int_packer(">i", "integer serde"), _int_unpacker(">i"))
_DOUBLE: Serde[float] = Serde("double", _to_double, lambda b: struct.unpack(">d", b)[0])
_BYTES: Serde[bytes] = Serde("bytes", _to_raw_bytes, bytes)
_JSON: Serde[Any] = Serde("json", _to_json, lambda b: json.loads(bytes(b).decode("utf-8")))
_PICKLE: Serde[Any] = Serde("pickle", pickle.dumps, pickle.loads)


@final
class Serdes:
    """Factory of the built-in serdes (Kafka's formats)."""

    @staticmethod
    def string() -> Serde[str]:
        """UTF-8 text."""
        return _STRING

    @staticmethod
    def long() -> Serde[int]:
        """Signed 64-bit integer, 8 bytes big-endian."""
        return _LONG

    @staticmethod
    def integer() -> Serde[int]:
        """Signed 32-bit integer, 4 bytes big-endian."""
        return _INTEGER

    @staticmethod
    def double() -> Serde[float]:
        """IEEE 754 double, 8 bytes big-endian."""
        return _DOUBLE

    @staticmethod
    def bytes() -> Serde[bytes]:
        """Raw bytes, unchanged."""
        return _BYTES

    @staticmethod
    def json() -> Serde[Any]:
        """Compact JSON (sorted keys) in UTF-8."""
        return _JSON

    @staticmethod
    def pickle() -> Serde[Any]:
        """Python pickle. TRUSTED DATA ONLY: unpickling runs arbitrary code.

        Never use it for topics that untrusted producers can write; it is never a default.
        """
        return _PICKLE

    @staticmethod
    def time_windowed(inner: Serde[Any], window_size_ms: int) -> Serde[Windowed]:
        """Kafka's time-windowed key: inner key bytes + start (8 bytes, big-endian).

        The end is not stored; reading rebuilds it as ``start + window_size_ms``, capped at
        ``2**63 - 1``.
        """
        if window_size_ms <= 0:
            raise ValueError(f"window size must be positive, got {window_size_ms}")

        def to_bytes(w: Windowed) -> bytes:
            return _inner_bytes(inner, w) + struct.pack(">q", w.window.start)

        def from_bytes(data: bytes) -> Windowed:
            if len(data) < 8:
                raise ValueError("windowed key shorter than 8 bytes")
            start = struct.unpack(">q", data[-8:])[0]
            end = min(start + window_size_ms, LONG_MAX)
            return Windowed(inner.deserialize(data[:-8]), Window(start, end))

        return Serde(f"time_windowed({inner.name}, {window_size_ms})", to_bytes, from_bytes)

    @staticmethod
    def session_windowed(inner: Serde[Any]) -> Serde[Windowed]:
        """Kafka's session-windowed key: inner key bytes + end (8) + start (8), big-endian."""

        def to_bytes(w: Windowed) -> bytes:
            return _inner_bytes(inner, w) + struct.pack(">qq", w.window.end, w.window.start)

        def from_bytes(data: bytes) -> Windowed:
            if len(data) < 16:
                raise ValueError("session-windowed key shorter than 16 bytes")
            end, start = struct.unpack(">qq", data[-16:])
            return Windowed(inner.deserialize(data[:-16]), Window(start, end))

        return Serde(f"session_windowed({inner.name})", to_bytes, from_bytes)


def _inner_bytes(inner: Serde[Any], w: Windowed) -> bytes:
    if not isinstance(w, Windowed):
        raise TypeError("windowed serde needs a Windowed key")
    data = inner.serialize(w.key)
    return b"" if data is None else data


def fallback_bytes(value: Any) -> bytes:
    """Deterministic bytes of a value that has no serde, for ordering and size accounting.

    str as UTF-8, bytes as is, int as Kafka's long (8 bytes big-endian; json beyond 64 bits),
    float as double, :class:`Windowed` as Kafka's time-windowed layout, JSON-able containers as
    compact sorted JSON, anything else as a pickle (written only, never read back).
    """
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return struct.pack(">q", value)
        return str(value).encode("ascii")
    if isinstance(value, float):
        return struct.pack(">d", value)
    if isinstance(value, Windowed):
        return fallback_bytes(value.key) + struct.pack(">q", value.window.start)
    try:
        return _to_json(value)
    except (TypeError, ValueError):
        return pickle.dumps(value)


_PACK_LONG = struct.Struct(">q").pack


def _serialize_long(value: Any) -> bytes | None:
    """``Serdes.long().serialize`` with the common case (a plain int in range) first."""
    if type(value) is int and -(2**63) <= value < 2**63:
        return _PACK_LONG(value)
    return _LONG.serialize(value)  # None, or the serde's own error for anything else


def _serialize_string(value: Any) -> bytes | None:
    """``Serdes.string().serialize`` with the common case (a str) first."""
    if type(value) is str and value.isascii():
        return value.encode("ascii")
    return _STRING.serialize(value)  # None, non-ASCII text, or the serde's own error


_FAST_SERIALIZERS: dict[int, Callable[[Any], bytes | None]] = {
    id(_LONG): _serialize_long,
    id(_STRING): _serialize_string,
}


def serializer_of(serde: Serde[Any] | None) -> Callable[[Any], bytes | None]:
    """The serialize function of ``serde``, or :func:`fallback_bytes` without one.

    For ``Serdes.long()`` and ``Serdes.string()`` it is a faster function with the same
    results and errors.
    """
    if serde is None:
        return fallback_bytes
    return _FAST_SERIALIZERS.get(id(serde), serde.serialize)


def windowed_serializer(inner: Serde[Any] | None, session: bool
                        ) -> Callable[[Any], bytes]:
    """Serializer of windowed keys in Kafka's layout over ``inner`` (or the fallback)."""
    inner_ser = serializer_of(inner)
    if session:
        def ser_session(w: Windowed) -> bytes:
            return (inner_ser(w.key) or b"") + struct.pack(">qq", w.window.end, w.window.start)
        return ser_session

    def ser_time(w: Windowed) -> bytes:
        return (inner_ser(w.key) or b"") + struct.pack(">q", w.window.start)
    return ser_time


def _deserialize_string(data: Any) -> str | None:
    """``Serdes.string().deserialize`` with the common case (ASCII bytes) first."""
    if type(data) is bytes and data.isascii():
        return data.decode("ascii")
    return _STRING.deserialize(data)  # None, non-ASCII text, or the serde's own error


def _string_round_trip(value: Any) -> Any:
    """``deserialize(serialize(value))`` for ``Serdes.string()``: ``value`` itself.

    Serializing a str and reading it back gives an equal str, so only the serializer's checks
    remain: the same errors, without the two copies.
    """
    if type(value) is str and value.isascii():
        return value
    data = _STRING.serialize(value)  # None, non-ASCII text, or the serde's own error
    return None if data is None else _STRING.deserialize(data)


def _long_round_trip(value: Any) -> Any:
    """``deserialize(serialize(value))`` for ``Serdes.long()``: ``value`` itself."""
    if type(value) is int and -(2**63) <= value < 2**63:
        return value
    return _LONG.deserialize(_LONG.serialize(value))  # None, or the serde's own error


_FAST_DESERIALIZERS: dict[int, Callable[[Any], Any]] = {id(_STRING): _deserialize_string}
_ROUND_TRIPS: dict[int, Callable[[Any], Any]] = {
    id(_STRING): _string_round_trip,
    id(_LONG): _long_round_trip,
}


def deserializer_of(serde: Serde[Any]) -> Callable[[Any], Any]:
    """The deserialize function of ``serde``.

    For ``Serdes.string()`` it is a faster function with the same results and errors.
    """
    return _FAST_DESERIALIZERS.get(id(serde), serde.deserialize)


def round_trip_of(serde: Serde[Any]) -> Callable[[Any], Any] | None:
    """A function giving ``serde.deserialize(serde.serialize(v))`` without the bytes.

    ``None`` if ``serde`` has none (then serialize and deserialize).

    Only the built-in serdes whose round trip gives back an equal value have one (string,
    long); its errors are the serializer's.
    """
    return _ROUND_TRIPS.get(id(serde))
