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
``True``) have different bytes: give such keys one type.

**Values without a serde** (:func:`fallback_value_bytes`) are only measured, for a suppression
with a ``max_bytes`` limit: the types above have the same bytes as keys, ``dict`` and ``list``
are compact JSON with sorted keys, anything else is a :class:`SerdeError` asking for a value
serde.

**Errors.** A :class:`SerdeError` never holds the whole value: it shows the value's type,
length and the ``repr`` of its first 40 characters or bytes. :func:`serialize_for_topic`,
:func:`deserialize_from_topic` and :func:`deserialize_produced` run a serde for a record of a
topic, and their errors name the topic.
"""

from __future__ import annotations

import builtins
import json
import operator
import pickle
import reprlib
import struct
from collections.abc import Callable
from itertools import islice
from typing import Any, Generic, Protocol, TypeVar, final, runtime_checkable

from suppress.time import to_millis

from .errors import TopologyError
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

_PREFIX = 40
"""How many characters or bytes of a value an error message shows."""
_REASON = 200
"""How many characters of the underlying exception's message an error message shows."""


class SerdeError(TopologyError):
    """A value that its serde cannot write, or bytes it cannot read.

    The message names the serde and shows the value's type, length and first 40 characters
    or bytes, never the whole value. ``topic`` is the topic of the record, when known.
    """

    def __init__(self, message: str, *, topic: str | None = None) -> None:
        super().__init__(message)
        self.topic = topic


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


def _name_of(serde: object) -> str:
    """The name of ``serde`` for messages: its ``name`` attribute, else its class name."""
    name = getattr(serde, "name", None)
    return name if isinstance(name, str) else type(serde).__qualname__


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = _repr.maxlong = _PREFIX
_repr.maxlevel = 2
_ITEMS = 4
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = _repr.maxfrozenset = _ITEMS


def _head(value: object) -> object:
    """A few items of a big dict or set (reprlib sorts them whole before cutting)."""
    if isinstance(value, dict):
        return dict(islice(value.items(), _ITEMS + 1))
    if isinstance(value, set | frozenset):
        return (set if isinstance(value, set) else frozenset)(islice(value, _ITEMS + 1))
    return value


def _describe(value: object) -> str:
    """``value`` for an error message: its type, length if it has one, and a short prefix.

    >>> _describe("x" * 100)
    "str of length 100: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'..."
    >>> _describe(7)
    'int 7'
    """
    kind = type(value).__name__
    if isinstance(value, str | bytes | bytearray | memoryview):
        head = value[:_PREFIX]
        if isinstance(head, memoryview):
            head = head.tobytes()
        more = "..." if len(value) > _PREFIX else ""
        return f"{kind} of length {len(value)}: {head!r}{more}"
    try:
        size = len(value)  # type: ignore[arg-type]
    except Exception:
        return f"{kind} {_repr.repr(value)}"
    return f"{kind} of length {size}: {_repr.repr(_head(value))}"


def _reason(exc: BaseException) -> str:
    """The message of ``exc``, cut to 200 characters (its class name when it has none)."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= _REASON else text[:_REASON] + "..."


# -- the built-in serdes ----------------------------------------------------------------------


@final
class _NamedSerde(Generic[T]):
    """A built-in :class:`Serde`: a name and a pair of functions ``T -> bytes -> T``.

    Any exception of either function becomes a :class:`SerdeError` naming the serde.
    """

    __slots__ = ("name", "_to_bytes", "_from_bytes", "fast_serialize", "many_from_bytes",
                 "layout", "reads_back")

    def __init__(self, name: str, to_bytes: Callable[[T], bytes],
                 from_bytes: Callable[[bytes], T]) -> None:
        self.name = name
        self._to_bytes = to_bytes
        self._from_bytes = from_bytes
        self.fast_serialize: Callable[[Any], bytes | None] | None = None
        """:meth:`serialize` with the common case first: the same results and errors."""
        self.many_from_bytes: Callable[[list[Any]], list[Any]] | None = None
        """``[deserialize(d) for d in datas]`` at once, for a list of ``bytes``; it raises
        (any exception) where it cannot, and then :meth:`deserialize` must run one by one
        (it has the errors). Only for functions that run no user code."""
        self.layout: tuple[Any, ...] | None = None
        """What the bytes are, for the built-ins whose :attr:`reads_back` is known: equal
        layouts write the same bytes for every value and read them back alike."""
        self.reads_back: Callable[[list[Any]], bool] | None = None
        """``check(values)`` true means: every value of the list that this serde wrote without
        error reads back from its bytes as an equal value of the same type (see
        :func:`reads_back_as_written`)."""

    def serialize(self, value: T | None) -> bytes | None:
        """Return the bytes of ``value`` (``None`` for ``None``).

        :raises SerdeError: for a value of the wrong type or range, naming the serde.
        """
        if value is None:
            return None
        try:
            return self._to_bytes(value)
        except Exception as exc:
            raise SerdeError(
                f"serde {self.name} cannot serialize {_describe(value)}: {_reason(exc)}"
            ) from exc

    def deserialize(self, data: bytes | None) -> T | None:
        """Return the value in ``data`` (``None`` for ``None``).

        :raises SerdeError: for bytes of the wrong length or content, naming the serde.
        """
        if data is None:
            return None
        if not isinstance(data, bytes | bytearray | memoryview):
            raise SerdeError(f"serde {self.name} cannot deserialize {_describe(data)}: "
                             "it reads bytes")
        try:
            return self._from_bytes(data)
        except Exception as exc:
            raise SerdeError(
                f"serde {self.name} cannot deserialize {_describe(data)}: {_reason(exc)}"
            ) from exc

    def __repr__(self) -> str:
        return f"Serde({self.name})"

    def __reduce__(self) -> tuple[Callable[[str], _NamedSerde[Any]], tuple[str]]:
        """Pickled by name: a copy (a Spark executor's) is the same built-in object."""
        return _built_in, (self.name,)


def _built_in(name: str) -> _NamedSerde[Any]:
    """The built-in serde called ``name`` (``Serdes.<name>()``)."""
    serde: _NamedSerde[Any] = getattr(Serdes, name)()
    return serde


_LONG_STRUCT = struct.Struct(">q")
_PACK_LONG = _LONG_STRUCT.pack
_UNPACK_LONG = _LONG_STRUCT.unpack
_PACK_DOUBLE = struct.Struct(">d").pack
_UNPACK_DOUBLE = struct.Struct(">d").unpack
_SESSION_STRUCT = struct.Struct(">qq")


def _int_packer(fmt: str, what: str) -> Callable[[int], bytes]:
    packer = struct.Struct(fmt).pack

    def pack(value: int) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{what} needs an int")
        return packer(value)

    return pack


def _int_unpacker(fmt: str, what: str) -> Callable[[bytes], int]:
    packer = struct.Struct(fmt)
    unpack, size = packer.unpack, packer.size

    def read(data: bytes) -> int:
        if len(data) != size:
            raise ValueError(f"{what} needs exactly {size} bytes, got {len(data)}")
        value: int = unpack(data)[0]
        return value

    return read


def _to_str_bytes(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError("string serde needs a str")
    return value.encode("utf-8")


def _from_str_bytes(data: bytes) -> str:
    return bytes(data).decode("utf-8")


def _to_raw_bytes(value: bytes) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("bytes serde needs bytes")
    return bytes(value)


def _to_double(value: float) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("double serde needs a float (or an int)")
    return _PACK_DOUBLE(value)


def _from_double(data: bytes) -> float:
    if len(data) != 8:
        raise ValueError(f"double serde needs exactly 8 bytes, got {len(data)}")
    value: float = _UNPACK_DOUBLE(data)[0]
    return value


def _to_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _from_json(data: bytes) -> Any:
    return json.loads(bytes(data).decode("utf-8"))


def _from_pickle(data: bytes) -> Any:
    return pickle.loads(data)


_STRING: _NamedSerde[str] = _NamedSerde("string", _to_str_bytes, _from_str_bytes)
_LONG: _NamedSerde[int] = _NamedSerde("long", _int_packer(">q", "long serde"),
                                      _int_unpacker(">q", "long serde"))
_INTEGER: _NamedSerde[int] = _NamedSerde("integer", _int_packer(">i", "integer serde"),
                                         _int_unpacker(">i", "integer serde"))
_DOUBLE: _NamedSerde[float] = _NamedSerde("double", _to_double, _from_double)
_BYTES: _NamedSerde[bytes] = _NamedSerde("bytes", _to_raw_bytes, bytes)
_JSON: _NamedSerde[Any] = _NamedSerde("json", _to_json, _from_json)
_PICKLE: _NamedSerde[Any] = _NamedSerde("pickle", pickle.dumps, _from_pickle)


# -- windowed key layouts: written once, used by the serdes, the runtime and the fallback ----


class _TimeWindowedWriter:
    """Kafka's time-windowed key layout: ``inner(key)`` bytes + start (8 bytes, big-endian)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Callable[[Any], bytes | None]) -> None:
        self.inner = inner

    def __call__(self, w: Windowed) -> bytes:
        return (self.inner(w[0]) or b"") + _PACK_LONG(w[1][0])


def _time_windowed_writer(inner: Callable[[Any], bytes | None]) -> Callable[[Windowed], bytes]:
    return _TimeWindowedWriter(inner)


def time_windowed_parts(serializer: Callable[[Any], Any], start: int
                        ) -> tuple[Callable[[Any], Any], bytes] | None:
    """``(inner, packed start)`` of a time-windowed key serializer built here, else ``None``.

    For ``serializer`` from :func:`windowed_serializer` (``session=False``), the bytes of
    ``Windowed(key, Window(start, end))`` are ``(inner(key) or b"") + packed start``, with the
    same errors, so that a caller writing many keys of one window packs its start once.
    """
    if type(serializer) is not _TimeWindowedWriter:
        return None
    return serializer.inner, _PACK_LONG(start)


class _SessionWindowedWriter:
    """Kafka's session key layout: ``inner(key)`` bytes + end (8) + start (8), big-endian."""

    __slots__ = ("inner",)

    def __init__(self, inner: Callable[[Any], bytes | None]) -> None:
        self.inner = inner

    def __call__(self, w: Windowed) -> bytes:
        window = w[1]
        return (self.inner(w[0]) or b"") + _SESSION_STRUCT.pack(window[1], window[0])


def _session_windowed_writer(inner: Callable[[Any], bytes | None]
                             ) -> Callable[[Windowed], bytes]:
    return _SessionWindowedWriter(inner)


def session_windowed_inner(serializer: Callable[[Any], Any]) -> Callable[[Any], Any] | None:
    """The inner serializer of a session-windowed key serializer built here, else ``None``.

    For ``serializer`` from :func:`windowed_serializer` (``session=True``), the bytes of
    ``Windowed(key, Window(start, end))`` are ``(inner(key) or b"")`` followed by
    :func:`pack_session_bounds` of ``(end, start)``, with the same errors.
    """
    if type(serializer) is not _SessionWindowedWriter:
        return None
    return serializer.inner


pack_session_bounds: Callable[[int, int], bytes] = _SESSION_STRUCT.pack
"""``(end, start)`` as the session key layout writes them after the key (16 bytes)."""


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


# -- bytes of keys and values without a serde -------------------------------------------------

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


# -- serializers for the runtime ----------------------------------------------------------------


def _serialize_long(value: Any) -> bytes | None:
    """``Serdes.long().serialize`` with the common case (a plain int in range) first."""
    if type(value) is int and -(2**63) <= value < 2**63:
        return _PACK_LONG(value)
    return _LONG.serialize(value)  # None, or the serde's own error for anything else


def _serialize_string(value: Any) -> bytes | None:
    """``Serdes.string().serialize`` with the common case (a str) first."""
    if type(value) is str:
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            pass  # the serde raises its own error below
    return _STRING.serialize(value)  # None, or the serde's own error for anything else


def _many_longs(datas: list[Any]) -> list[Any]:
    """``Serdes.long()`` reading a list of 8-byte ``bytes`` in one unpack."""
    if datas and set(map(len, datas)) != {8}:
        raise ValueError("not all 8 bytes long")
    return list(struct.unpack(f">{len(datas)}q", b"".join(datas)))


def _many_strings(datas: list[Any]) -> list[Any]:
    """``Serdes.string()`` reading a list of ``bytes`` (``TypeError`` for anything else)."""
    return list(map(bytes.decode, datas))


def _longs_read_back(values: list[Any]) -> bool:
    """Whether ``Serdes.long()`` reads back each value it wrote as itself: ``int`` or None."""
    return set(map(type, values)) <= {int, type(None)}


def _strings_read_back(values: list[Any]) -> bool:
    """Whether ``Serdes.string()`` reads back each value it wrote as itself: ``str`` or None.

    A str that was written is valid UTF-8 once encoded, and decodes to an equal str.
    """
    return set(map(type, values)) <= {str, type(None)}


_LONG.fast_serialize, _LONG.many_from_bytes = _serialize_long, _many_longs
_STRING.fast_serialize, _STRING.many_from_bytes = _serialize_string, _many_strings
_LONG.layout, _LONG.reads_back = ("long",), _longs_read_back
_STRING.layout, _STRING.reads_back = ("string",), _strings_read_back


_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)


def _time_windowed_read_back(inner: Callable[[list[Any]], bool], size: int
                             ) -> Callable[[list[Any]], bool]:
    """The ``reads_back`` check of a time-windowed serde over an inner serde's ``inner``.

    Its bytes keep the key and the start; the end read back is ``start + size`` (capped), so
    a windowed key reads back as itself when its window has that end and its key reads back
    through the inner serde.
    """

    def check(keys: list[Any]) -> bool:
        types = set(map(type, keys))
        if not types <= {Windowed, type(None)}:
            return False
        if type(None) in types:
            keys = [key for key in keys if key is not None]
        windows = list(map(_SECOND, keys))
        if windows and (set(map(type, windows)) != {Window}
                        or set(map(type, map(_FIRST, windows))) != {int}):
            return False
        if any(window[1] != min(window[0] + size, LONG_MAX) for window in set(windows)):
            return False
        return inner(list(map(_FIRST, keys)))

    return check


def reads_back_as_written(writer: Serde[Any] | None, reader: Serde[Any] | None
                          ) -> Callable[[list[Any]], bool] | None:
    """A check that ``reader`` reads back, from ``writer``'s bytes, the values written.

    Only for built-in serdes that write the same bytes (the same string or long serde, or
    time-windowed ones over such with the same window size); ``None`` otherwise. The
    check takes values that ``writer`` serialized without error: true means each reads back
    as an equal value of the same type, so a reader may take the values themselves instead
    of their bytes (false says nothing about any one value). Runtime complexity: O(len).
    """
    if type(writer) is not _NamedSerde or type(reader) is not _NamedSerde:
        return None
    if writer.layout is None or writer.layout != reader.layout:
        return None
    return reader.reads_back


def _fast_time_windowed(inner: Callable[[Any], bytes | None],
                        serialize: Callable[[Any], bytes | None]
                        ) -> Callable[[Any], bytes | None]:
    """A time-windowed serde's ``serialize`` with the common case first.

    ``inner`` is the inner built-in serde's fast serializer (no user code: calling it again
    is harmless); anything unusual goes to ``serialize``, which has the serde's errors.
    """

    def fast(w: Any) -> bytes | None:
        if type(w) is Windowed:
            try:
                start = w[1][0]
                if type(start) is int:
                    return (inner(w[0]) or b"") + _PACK_LONG(start)
            except Exception:  # noqa: BLE001 - the serde's own path raises its error
                pass
        return serialize(w)

    return fast


def _many_time_windowed(inner: Callable[[list[Any]], list[Any]], size: int
                        ) -> Callable[[list[Any]], list[Any]]:
    """A time-windowed serde reading a list of ``bytes`` (see ``many_from_bytes``).

    One unpack of the starts, the inner keys through ``inner``, one :class:`Window` per
    start.
    """

    def many(datas: list[Any]) -> list[Any]:
        if datas and (set(map(type, datas)) != {bytes} or min(map(len, datas)) < 8):
            raise ValueError("not all bytes of at least 8")
        starts = struct.unpack(f">{len(datas)}q", b"".join([d[-8:] for d in datas]))
        keys = inner([d[:-8] for d in datas])
        windows: dict[int, Window] = {}
        out = []
        for key, start in zip(keys, starts, strict=True):
            window = windows.get(start)
            if window is None:
                window = windows[start] = Window(start, min(start + size, LONG_MAX))
            out.append(_new_tuple(Windowed, (key, window)))
        return out

    return many


_new_tuple = tuple.__new__  # a Windowed of a key and a Window, without its __new__
_NO_USER_CODE = (_serialize_long, _serialize_string, fallback_key_bytes, fallback_value_bytes)


def serializer_of(serde: Serde[Any] | None,
                  fallback: Callable[[Any], bytes] = fallback_key_bytes
                  ) -> Callable[[Any], bytes | None]:
    """Return the serialize function of ``serde``, or ``fallback`` without one.

    :param fallback: :func:`fallback_key_bytes` (the default) for keys,
        :func:`fallback_value_bytes` for values.

    For ``Serdes.long()``, ``Serdes.string()`` and time-windowed serdes over them it is a
    faster function with the same results and errors.
    """
    if serde is None:
        return fallback
    if type(serde) is _NamedSerde and serde.fast_serialize is not None:
        return serde.fast_serialize
    return serde.serialize


def runs_no_user_code(serializer: Callable[[Any], Any]) -> bool:
    """Whether ``serializer`` is a built-in function that runs no user code.

    A pure function of its argument (the fallbacks, the string and long serializers): calling
    it again, e.g. to raise its error elsewhere, is harmless.
    """
    return any(serializer is known for known in _NO_USER_CODE)


def long_packer_of(serializer: Callable[[Any], Any]) -> Callable[[int], bytes] | None:
    """The packer behind ``Serdes.long()``'s fast serializer (:func:`serializer_of`).

    It gives the serializer's bytes for an ``int`` (not a ``bool``) in ``[-2**63, 2**63)``;
    ``None`` for any other serializer.
    """
    return _PACK_LONG if serializer is _serialize_long else None


def many_deserializer_of(serde: Serde[Any]) -> Callable[[list[Any]], list[Any]] | None:
    """A function giving ``[serde.deserialize(d) for d in datas]`` for a list of ``bytes``.

    Only built-in serdes that have one (string, long, time-windowed over those): it runs no
    user code, and raises (any exception) where it cannot read the list; the caller then
    deserializes one by one, which raises the serde's own error for the first bad item.
    ``None`` for any other serde.
    """
    return serde.many_from_bytes if type(serde) is _NamedSerde else None


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


_ROUND_TRIPS: dict[int, Callable[[Any], Any]] = {
    id(_STRING): _string_round_trip,
    id(_LONG): _long_round_trip,
}


def _strings_kept(values: list[Any]) -> bool:
    """Whether :func:`_string_round_trip` gives back each value itself: ASCII ``str``s."""
    return not values or (set(map(type, values)) == {str} and "".join(values).isascii())


def _longs_kept(values: list[Any]) -> bool:
    """Whether :func:`_long_round_trip` gives back each value itself: ``int``s in range."""
    return not values or (set(map(type, values)) == {int}
                          and -(2**63) <= min(values) and max(values) < 2**63)


_KEPT_BY_ROUND_TRIPS: dict[int, Callable[[list[Any]], bool]] = {
    id(_STRING): _strings_kept,
    id(_LONG): _longs_kept,
}


def round_trip_of(serde: Serde[Any]) -> Callable[[Any], Any] | None:
    """A function giving ``serde.deserialize(serde.serialize(v))`` without the bytes.

    ``None`` if ``serde`` has none (then serialize and deserialize).

    Only the built-in serdes whose round trip gives back an equal value have one (string,
    long); its errors are the serializer's.
    """
    return _ROUND_TRIPS.get(id(serde))


def round_trip_keeps_of(serde: Serde[Any]) -> Callable[[list[Any]], bool] | None:
    """A check that :func:`round_trip_of` ``(serde)`` gives back every value of a list itself.

    ``check(values)`` true means: for each value, the round trip returns that very object
    and raises nothing, so a caller may skip it for the whole list (false says nothing
    about any one value). ``None`` for a serde without a round trip. Runtime complexity:
    O(total size of the values), in C.
    """
    return _KEPT_BY_ROUND_TRIPS.get(id(serde))
