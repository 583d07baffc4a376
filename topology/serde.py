r"""Serializers and deserializers with Kafka's byte formats, and the bytes of data without one.

**Serdes.** A :class:`Serde` is anything with ``serialize(value) -> bytes | None`` and
``deserialize(data) -> value | None``; ``None`` (a tombstone) stays ``None`` both ways. A
user's class implements it by defining those two methods (no base class needed; an optional
``name`` attribute is used in error messages). :class:`Serdes` gives the built-in ones, with
Kafka's formats.

>>> Serdes.long().serialize(1)
b'\x00\x00\x00\x00\x00\x00\x00\x01'
>>> from topology.windows import Window, Windowed
>>> s = Serdes.time_windowed(Serdes.string(), 10)
>>> s.deserialize(s.serialize(Windowed("a", Window(0, 10))))
Windowed(key='a', window=Window(start=0, end=10))

**Keys and values without a serde** have bytes of their own (:func:`fallback_key_bytes`,
:func:`fallback_value_bytes`: the table is in :mod:`topology._key_bytes`). Kafka's windowed key
layouts are written once, in :mod:`topology._windowed_keys`; the fast paths of the built-in
serdes (same results and errors, less work) are in :mod:`topology._serde_fast`, and the
built-in serdes themselves in :mod:`topology._builtin_serdes`.

**Errors.** A :class:`SerdeError` never holds the whole value: it shows the value's type,
length and the ``repr`` of its first 40 characters or bytes. :func:`serialize_for_topic`,
:func:`deserialize_from_topic` and :func:`deserialize_produced` run a serde for a record of a
topic, and their errors name the topic.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, final, runtime_checkable

from suppress.time import to_millis

from ._builtin_serdes import (
    _BYTES,
    _DOUBLE,
    _INTEGER,
    _JSON,
    _LONG,
    _PICKLE,
    _STRING,
    _UNPACK_LONG,
    _NamedSerde,
)
from ._key_bytes import fallback_key_bytes, fallback_value_bytes
from ._serde_errors import SerdeError, _describe, _name_of, _reason
from ._serde_fast import (
    _fast_time_windowed,
    _many_time_windowed,
    _time_windowed_read_back,
    serializer_of,
)
from ._serde_fast import long_packer_of as long_packer_of
from ._serde_fast import many_deserializer_of as many_deserializer_of
from ._serde_fast import reads_back_as_written as reads_back_as_written
from ._serde_fast import round_trip_keeps_of as round_trip_keeps_of
from ._serde_fast import round_trip_of as round_trip_of
from ._windowed_keys import (
    _SESSION_STRUCT,
    _session_windowed_writer,
    _time_windowed_writer,
)
from ._windowed_keys import pack_session_bounds as pack_session_bounds
from ._windowed_keys import session_windowed_inner as session_windowed_inner
from ._windowed_keys import time_windowed_parts as time_windowed_parts
from .windows import LONG_MAX, Window, Windowed

__all__ = (
    "Serde",
    "SerdeError",
    "Serdes",
    "deserialize_from_topic",
    "deserialize_produced",
    "fallback_key_bytes",
    "fallback_value_bytes",
    "serialize_for_topic",
    "serializer_of",
    "windowed_serializer",
)

T = TypeVar("T")


@runtime_checkable
class Serde(Protocol[T]):
    """What turns values of type ``T`` into ``bytes`` and back.

    Implement it with a class that defines both methods; ``isinstance(obj, Serde)`` is true
    for any object that has them. ``None`` must pass through both ways unchanged. An
    optional ``name`` attribute (a ``str``) names the serde in error messages.
    """

    def serialize(self, value: T | None) -> bytes | None:
        """Return the bytes of ``value``; ``None`` for ``None``.

        :raises Exception: for a value it cannot write (the built-ins raise
            :class:`SerdeError`).
        """
        ...

    def deserialize(self, data: bytes | None) -> T | None:
        """Return the value in ``data``; ``None`` for ``None``.

        :raises Exception: for bytes it cannot read (the built-ins raise :class:`SerdeError`).
        """
        ...


def _built_in(name: str) -> _NamedSerde[Any]:
    """The built-in serde called ``name`` (``Serdes.<name>()``)."""
    serde: _NamedSerde[Any] = getattr(Serdes, name)()
    return serde


def _checked(write: Callable[[Windowed], bytes]) -> Callable[[Windowed], bytes]:
    """``write`` for a serde: refuses anything but a :class:`Windowed` with a clear message."""

    def to_bytes(w: Windowed) -> bytes:
        if type(w) is not Windowed:
            raise TypeError("a windowed serde needs a Windowed key")
        return write(w)

    return to_bytes


@final
class Serdes:
    """Factory of the built-in serdes (Kafka's formats).

    Each one raises :class:`SerdeError`, naming itself, for a value of the wrong type or
    bytes of the wrong shape.
    """

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
        """IEEE 754 double, 8 bytes big-endian; NaN and infinities included.

        An ``int`` is written as the nearest double (and read back as a ``float``).
        """
        return _DOUBLE

    @staticmethod
    def bytes() -> Serde[bytes]:
        """Raw bytes, unchanged (``bytearray`` and ``memoryview`` are written as bytes)."""
        return _BYTES

    @staticmethod
    def json() -> Serde[Any]:
        """Compact JSON (sorted keys) in UTF-8.

        JSON has no tuples and only string object keys: a tuple reads back as a list, an
        ``int`` dict key as a string.
        """
        return _JSON

    @staticmethod
    def pickle() -> Serde[Any]:
        """Python pickle. TRUSTED DATA ONLY: unpickling runs arbitrary code.

        Never use it for topics that untrusted producers can write; it is never a default.
        """
        return _PICKLE

    @staticmethod
    def serde_from(to_bytes: Callable[[T], builtins.bytes],
                   from_bytes: Callable[[builtins.bytes], T], name: str = "custom") -> Serde[T]:
        """A serde from two functions (Kafka's ``Serdes.serdeFrom``); ``None`` passes through.

        Any exception of either function becomes a :class:`SerdeError` naming ``name``.

        >>> upper = Serdes.serde_from(lambda s: s.upper().encode(), bytes.decode, "upper")
        >>> upper.deserialize(upper.serialize("abc"))
        'ABC'

        :raises TypeError: if either function is not callable.
        """
        if not callable(to_bytes) or not callable(from_bytes):
            raise TypeError("serde_from() needs two callables: to_bytes and from_bytes")
        return _NamedSerde(name, to_bytes, from_bytes)

    @staticmethod
    def time_windowed(inner: Serde[Any], window_size_ms: int) -> Serde[Windowed]:
        """Kafka's time-windowed key: inner key bytes + start (8 bytes, big-endian).

        The end is not stored; reading rebuilds it as ``start + window_size_ms``, capped at
        ``2**63 - 1``.

        :param inner: the serde of the keys inside the windows.
        :param window_size_ms: the window size in ms, larger than zero.
        :raises TypeError: if ``inner`` is not a :class:`Serde` or the size not an ``int``.
        :raises ValueError: for a size that is not larger than zero.
        """
        _require_serde(inner, "time_windowed inner serde")
        size = to_millis(window_size_ms, "window size")
        if size == 0:
            raise ValueError("window size must be larger than zero, got 0 ms")
        inner_deserialize = inner.deserialize

        def from_bytes(data: bytes) -> Windowed:
            if len(data) < 8:
                raise ValueError(f"a time-windowed key has at least 8 bytes, got {len(data)}")
            start: int = _UNPACK_LONG(data[-8:])[0]
            window = Window(start, min(start + size, LONG_MAX))
            return Windowed(inner_deserialize(data[:-8]), window)

        name = f"time_windowed({_name_of(inner)}, {size})"
        serde = _NamedSerde(name, _checked(_time_windowed_writer(inner.serialize)), from_bytes)
        if type(inner) is _NamedSerde:  # a built-in inner serde: its fast paths, if any
            if inner.fast_serialize is not None:
                serde.fast_serialize = _fast_time_windowed(inner.fast_serialize,
                                                           serde.serialize)
            if inner.many_from_bytes is not None:
                serde.many_from_bytes = _many_time_windowed(inner.many_from_bytes, size)
            if inner.reads_back is not None:
                serde.layout = ("time_windowed", inner.layout, size)
                serde.reads_back = _time_windowed_read_back(inner.reads_back, size)
        return serde

    @staticmethod
    def session_windowed(inner: Serde[Any]) -> Serde[Windowed]:
        """Kafka's session-windowed key: inner key bytes + end (8) + start (8), big-endian.

        :param inner: the serde of the keys inside the sessions.
        :raises TypeError: if ``inner`` is not a :class:`Serde`.
        """
        _require_serde(inner, "session_windowed inner serde")
        inner_deserialize = inner.deserialize
        unpack = _SESSION_STRUCT.unpack

        def from_bytes(data: bytes) -> Windowed:
            if len(data) < 16:
                raise ValueError(
                    f"a session-windowed key has at least 16 bytes, got {len(data)}")
            end, start = unpack(data[-16:])
            return Windowed(inner_deserialize(data[:-16]), Window(start, end))

        name = f"session_windowed({_name_of(inner)})"
        return _NamedSerde(name, _checked(_session_windowed_writer(inner.serialize)),
                           from_bytes)


def _require_serde(serde: object, what: str) -> None:
    if not isinstance(serde, Serde):
        raise TypeError(f"{what} must be a Serde (see topology.Serdes), "
                        f"got {type(serde).__name__}")


def windowed_serializer(inner: Serde[Any] | None, session: bool) -> Callable[[Any], bytes]:
    """Return the serializer of windowed keys in Kafka's layout over ``inner``.

    :param inner: the serde of the keys inside the windows; ``None``:
        :func:`fallback_key_bytes`.
    :param session: Kafka's session layout (key + end + start) instead of the time-windowed
        one (key + start).
    """
    inner_ser = serializer_of(inner)
    return _session_windowed_writer(inner_ser) if session else _time_windowed_writer(inner_ser)


# -- running a serde for a record of a topic --------------------------------------------------


def serialize_for_topic(serde: Serde[Any], value: Any, topic: str,
                        part: str = "value") -> bytes | None:
    """Return ``serde.serialize(value)`` for the ``part`` (key or value) of a record of ``topic``.

    :raises SerdeError: if the serde fails (with any exception), saying "cannot serialize",
        naming the topic, the part and the serde; ``topic`` is set on the error.
    """
    try:
        return serde.serialize(value)
    except Exception as exc:
        detail = exc if isinstance(exc, SerdeError) else (
            f"serde {_name_of(serde)} failed on {_describe(value)}: {_reason(exc)}")
        raise SerdeError(f"cannot serialize the {part} of a record for topic {topic!r}: "
                         f"{detail}", topic=topic) from exc


def deserialize_from_topic(serde: Serde[T], data: bytes | None, topic: str,
                           part: str = "value") -> T | None:
    """Return ``serde.deserialize(data)`` for the ``part`` (key or value) of a record of ``topic``.

    :raises SerdeError: if the serde fails (with any exception), saying "cannot deserialize",
        naming the topic, the part and the serde; ``topic`` is set on the error.
    """
    try:
        return serde.deserialize(data)
    except Exception as exc:
        detail = exc if isinstance(exc, SerdeError) else (
            f"serde {_name_of(serde)} failed on {_describe(data)}: {_reason(exc)}")
        raise SerdeError(f"cannot deserialize the {part} of a record of topic {topic!r}: "
                         f"{detail}", topic=topic) from exc


def deserialize_produced(serde: Serde[T], value: Any, topic: str,
                         part: str = "value") -> T | None:
    """Return what a reader with ``serde`` sees of ``value``, written to ``topic`` unserialized.

    For a record that the topology wrote without a serde (kept as the object) and that is
    read with one: ``serde.deserialize(serde.serialize(value))``. Reading is what fails, so
    a value the serde cannot write is reported as "cannot deserialize".

    :raises SerdeError: if either step fails, saying "cannot deserialize", naming the topic,
        the part, the serde and the value's type; ``topic`` is set on the error.
    """
    try:
        return serde.deserialize(serde.serialize(value))
    except Exception as exc:
        name = _name_of(serde)
        raise SerdeError(
            f"cannot deserialize the {part} of a record of topic {topic!r} with serde "
            f"{name}: the topology wrote it without a serde as {_describe(value)}, which "
            f"serde {name} does not read back ({_reason(exc)})", topic=topic) from exc
