"""The state codec: how persistent state writes a value that has no serde, and reads it back.

Stores, suppression buffers and durable outputs keep bytes on disk. A value with a serde is
written with it; a value without one (the common case in tests, and for aggregates such as
counts, tuples or dataclasses) is written with this codec, which is self-describing and
reversible for the types records usually carry, so what runs in memory runs durable:

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
``set``            a 4-byte count and the items, in the order of their encoded bytes (equal
                   sets encode equal, whatever their insertion order)
``frozenset``      as ``set``, under its own tag
``Decimal``        its ``str`` as a 4-byte length and ASCII (NaN, sNaN, infinities, the sign
                   and exponent of ``-0.00`` included)
``date``           year (2 bytes), month, day (1 byte each)
``time``           hour, minute, second (1 byte each), microsecond (4 bytes), fold (1 byte),
                   then the tzinfo as a value (``None`` or one of the two zones below)
``datetime``       the ``date`` layout, the ``time`` layout (tzinfo as a value included)
``timedelta``      days (4 bytes signed), seconds, microseconds (4 bytes each)
``timezone``       the UTC offset in microseconds (8 bytes signed), then the name as a value:
                   ``None`` for the default ``UTC+HH:MM`` name, else a ``str``
``ZoneInfo``       its key (``Europe/Paris``) as a 4-byte length and UTF-8; read back as
                   ``ZoneInfo(key)``
``Enum`` member    the class name, then the member's value as a value
named tuple        the class name, a 4-byte count and the fields (as ``tuple``)
dataclass          the class name, a 4-byte count, then each field set on the instance: its
                   name (a 4-byte length and UTF-8) and its value
=================  ========================================================================

A class name is ``module:qualname`` as a 4-byte length and UTF-8. **Class resolution rule**
(reading runs no code of the data's choosing; there is no pickle in state): the module must
already be in :data:`sys.modules` (the codec never imports a module because the data names it:
import your model module before opening the state), the qualname is walked through the
namespaces (``vars``) of the module and its classes, without ``getattr`` hooks, and the object
found must be of the kind the tag says (an :class:`enum.Enum` subclass, a ``tuple`` subclass
with ``_fields``, a dataclass type); anything else raises :class:`StateCodecError` naming the
class and saying why. The class is then rebuilt with its own code only: an enum member by
``cls(value)``, a named tuple by ``cls._make(fields)``, a dataclass by ``cls(**fields)`` for
its ``init=True`` fields, then ``object.__setattr__`` for its ``init=False`` ones (frozen
dataclasses included). A field the state has and the class no longer has is refused; a field
the class has and the state lacks takes the class's default. A class defined inside a
function (``<locals>``), or one that cannot be found again under its own name, is refused
when it is written, not at restart.

Anything else (a class of no kind above, a ``datetime`` subclass, a ``tzinfo`` other than
``timezone`` and ``ZoneInfo``) raises :class:`StateCodecError` asking for a serde, when it is
written: never at restart. Reading bytes that were not written by this codec raises
:class:`StateCodecError` too, never returns a half-read value. Values equal in Python but of
different types or zones (``1`` and ``1.0``, the same instant in two zones) encode apart.

>>> decode(encode(("EUR", 1.5, [1, None], {"k": b"v"})))
('EUR', 1.5, [1, None], {'k': b'v'})
>>> from http import HTTPStatus
>>> decode(encode([HTTPStatus.NOT_FOUND, Decimal("-0.00"), frozenset({2, 1})]))
[<HTTPStatus.NOT_FOUND: 404>, Decimal('-0.00'), frozenset({1, 2})]
>>> decode(encode(datetime(2024, 3, 31, 2, 30, tzinfo=ZoneInfo("Europe/Paris"))))
datetime.datetime(2024, 3, 31, 2, 30, tzinfo=zoneinfo.ZoneInfo(key='Europe/Paris'))
"""

from __future__ import annotations

import dataclasses
import struct
import sys
from collections.abc import Callable, Iterable
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal, InvalidOperation
from enum import Enum
from itertools import chain
from typing import Any
from zoneinfo import ZoneInfo

from ..errors import StreamsError
from ..windows import Window, Windowed

__all__ = ("StateCodecError", "decode", "encode", "encodes_surely")

_LONG = struct.Struct(">q")
_DOUBLE = struct.Struct(">d")
_LENGTH = struct.Struct(">I")
_BOUNDS = struct.Struct(">qq")
_DAY = struct.Struct(">HBB")  # year, month, day
_CLOCK = struct.Struct(">BBBIB")  # hour, minute, second, microsecond, fold
_SPAN = struct.Struct(">iII")  # days, seconds, microseconds
_MAX_LENGTH = 2**32 - 1

_NONE, _TRUE, _FALSE = b"N", b"T", b"F"
_INT, _BIG_INT, _FLOAT, _STR, _BYTES = b"i", b"I", b"d", b"s", b"b"
_TUPLE, _LIST, _DICT, _WINDOW, _WINDOWED = b"t", b"l", b"m", b"W", b"w"
_SET, _FROZENSET, _DECIMAL = b"S", b"f", b"x"
_DATE, _TIME, _DATETIME, _TIMEDELTA, _TIMEZONE, _ZONEINFO = b"y", b"h", b"D", b"p", b"Z", b"z"
_ENUM, _NAMEDTUPLE, _DATACLASS = b"E", b"n", b"c"

_MICROSECOND = timedelta(microseconds=1)
_MISSING = object()


class StateCodecError(StreamsError, RuntimeError, ValueError):
    """A value the state codec cannot write, or bytes it cannot read."""


def encode(value: Any) -> bytes:
    """The bytes of ``value`` (see the module docstring for the types and layouts).

    :raises StateCodecError: for a type the codec does not write, naming the type and asking
        for a serde.
    """
    kind = value.__class__
    if kind is int and -(2**63) <= value < 2**63:  # fast paths, the same bytes as _write's
        return _INT + _LONG.pack(value)
    if kind is str:  # the most common key and value, written directly
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError:
            pass  # the general path below raises the codec's error
        else:
            if len(raw) <= _MAX_LENGTH:
                return _STR + _LENGTH.pack(len(raw)) + raw
    out: list[bytes] = []
    _write(value, out.append)
    return b"".join(out)


def encodes_surely(value: Any) -> bool:
    """Whether :func:`encode` writes ``value`` without fail, told in O(1) (O(n) for a str).

    True for ``None``, a ``bool``, a ``float``, an ``int`` in ``[-2**63, 2**63)`` and an ASCII
    ``str`` of up to ``2**32 - 1`` characters: the values a store may hold unencoded and
    encode later, knowing the encoding cannot raise then. False says nothing: encode to know.
    """
    kind = value.__class__
    if kind is int:
        return -(2**63) <= value < 2**63
    if kind is str:
        return value.isascii() and len(value) <= _MAX_LENGTH
    return kind is float or kind is bool or value is None


def decode(data: bytes) -> Any:
    """The value :func:`encode` wrote as ``data``.

    :raises StateCodecError: for bytes that are not one whole encoded value.
    """
    if data.__class__ is bytes:
        view = data
    elif isinstance(data, bytes | bytearray | memoryview):
        view = bytes(data)
    else:
        raise StateCodecError(f"the state codec reads bytes, got {type(data).__name__}")
    if view[:1] == _STR and len(view) >= 5 and _LENGTH.unpack_from(view, 1)[0] == len(view) - 5:
        try:  # a str, the most common key and value, read directly
            return view[5:].decode("utf-8")
        except UnicodeDecodeError:
            pass  # the general path below raises the codec's error
    try:
        value, end = _read(view, 0)
    except StateCodecError:
        raise  # a class that cannot be resolved or rebuilt, already named
    except (IndexError, struct.error, UnicodeDecodeError, RecursionError, TypeError, ValueError,
            OverflowError) as exc:
        raise StateCodecError(f"corrupt state: {len(view)} bytes that the state codec did not "
                              f"write ({type(exc).__name__}: {exc})") from exc
    if end != len(view):
        raise StateCodecError(f"corrupt state: {len(view) - end} bytes left after the value")
    return value


def _write(value: Any, put: Callable[[bytes], object]) -> None:
    kind = type(value)
    # the types records and buffered entries carry most come first, each in one put
    if kind is str:
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise StateCodecError(f"cannot write str {value[:40]!r}: {exc}") from exc
        put(_STR + _length(len(raw), "str") + raw)
    elif kind is int and -(2**63) <= value < 2**63:
        put(_INT + _LONG.pack(value))
    elif value is None:
        put(_NONE)
    elif kind is tuple or kind is list:
        put((_TUPLE if kind is tuple else _LIST) + _length(len(value), kind.__name__))
        _write_items(value, put)
    elif kind is Windowed:
        put(_WINDOWED)
        _write(value.key, put)
        put(_BOUNDS.pack(value.window.start, value.window.end))
    elif kind is bool:
        put(_TRUE if value else _FALSE)
    elif kind is int:
        raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
        put(_BIG_INT + _length(len(raw), "int") + raw)
    elif kind is float:
        put(_FLOAT + _DOUBLE.pack(value))
    elif kind is bytes or kind is bytearray or kind is memoryview:
        raw = bytes(value)
        put(_BYTES + _length(len(raw), "bytes") + raw)
    elif kind is dict:
        put(_DICT + _length(len(value), "dict"))
        _write_items(chain.from_iterable(value.items()), put)
    elif kind is Window:
        put(_WINDOW + _BOUNDS.pack(value.start, value.end))
    elif kind is set or kind is frozenset:
        put(_SET if kind is set else _FROZENSET)
        put(_length(len(value), kind.__name__))
        for raw in sorted([encode(item) for item in value]):
            put(raw)
    elif kind is Decimal:
        put(_DECIMAL)
        _put_text(str(value), put)
    elif kind is datetime:
        put(_DATETIME)
        put(_DAY.pack(value.year, value.month, value.day))
        put(_CLOCK.pack(value.hour, value.minute, value.second, value.microsecond, value.fold))
        _write_zone(value.tzinfo, kind, put)
    elif kind is date:
        put(_DATE)
        put(_DAY.pack(value.year, value.month, value.day))
    elif kind is time:
        put(_TIME)
        put(_CLOCK.pack(value.hour, value.minute, value.second, value.microsecond, value.fold))
        _write_zone(value.tzinfo, kind, put)
    elif kind is timedelta:
        put(_TIMEDELTA)
        put(_SPAN.pack(value.days, value.seconds, value.microseconds))
    elif kind is timezone or kind is ZoneInfo:
        _write_zone(value, kind, put)
    elif isinstance(value, Enum):
        put(_ENUM)
        put(_class_name(kind, _ENUM))
        _write(value._value_, put)
    elif isinstance(value, tuple) and isinstance(getattr(kind, "_fields", None), tuple):
        put(_NAMEDTUPLE)
        put(_class_name(kind, _NAMEDTUPLE))
        put(_length(len(value), kind.__name__))
        for item in value:
            _write(item, put)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        put(_DATACLASS)
        put(_class_name(kind, _DATACLASS))
        fields = []
        for name, _ in _dataclass_fields(kind):
            item = getattr(value, name, _MISSING)  # an init=False field may never be set
            if item is not _MISSING:
                fields.append((name, item))
        put(_length(len(fields), kind.__name__))
        for name, item in fields:
            _put_text(name, put)
            _write(item, put)
    else:
        raise StateCodecError(
            f"cannot write a value of type {kind.__name__} to persistent state without a "
            f"serde: give the store one (Materialized(key_serde=..., value_serde=...), "
            f"Consumed, Grouped), or use None, bool, int, float, str, bytes, tuples, lists, "
            f"dicts, sets, frozensets, Decimal, datetimes, dates, times, timedeltas, enums, "
            f"named tuples, dataclasses or windowed keys")


def _write_items(items: Iterable[Any], put: Callable[[bytes], object]) -> None:
    """:func:`_write` of each item, the common kinds without a call each.

    A str, an int of 64 bits, ``None`` or bytes (the items of record packs and state
    entries) is written in this loop, a list, tuple or dict by this loop over its items (so a
    nested container costs one frame per level, as in :func:`_write`), any other item through
    :func:`_write`.
    """
    for item in items:
        kind = type(item)
        if kind is str:
            try:
                raw = item.encode("utf-8")
            except UnicodeEncodeError:
                raw = None  # _write raises the codec's error
            if raw is not None and len(raw) <= _MAX_LENGTH:
                put(_STR + _LENGTH.pack(len(raw)) + raw)
                continue
        elif kind is int:
            if -(2**63) <= item < 2**63:
                put(_INT + _LONG.pack(item))
                continue
        elif item is None:
            put(_NONE)
            continue
        elif kind is tuple or kind is list:  # nested: one frame per level, as in _write
            put((_TUPLE if kind is tuple else _LIST) + _length(len(item), kind.__name__))
            _write_items(item, put)
            continue
        elif kind is dict:
            put(_DICT + _length(len(item), "dict"))
            _write_items(chain.from_iterable(item.items()), put)
            continue
        elif kind is bytes and len(item) <= _MAX_LENGTH:
            put(_BYTES + _LENGTH.pack(len(item)) + item)
            continue
        _write(item, put)


def _put_text(text: str, put: Callable[[bytes], object]) -> None:
    raw = text.encode("utf-8")
    put(_length(len(raw), "str"))
    put(raw)


def _write_zone(zone: tzinfo | None, owner: type, put: Callable[[bytes], object]) -> None:
    """Write a tzinfo (or ``None``) as a value: ``timezone`` or ``ZoneInfo``, nothing else."""
    kind = type(zone)
    if zone is None:
        put(_NONE)
    elif kind is timezone:
        offset = zone.utcoffset(None)
        assert offset is not None  # a timezone always has one
        name: str | None = zone.tzname(None)
        if name == timezone(offset).tzname(None):
            name = None  # the default name: read back as timezone(offset), utc as utc
        put(_TIMEZONE)
        put(_LONG.pack(offset // _MICROSECOND))
        _write(name, put)
    elif kind is ZoneInfo and zone.key is not None:  # type: ignore[attr-defined]
        put(_ZONEINFO)
        _put_text(zone.key, put)  # type: ignore[attr-defined]
    else:
        raise StateCodecError(
            f"cannot write a {owner.__name__} with tzinfo {zone!r} to persistent state: the "
            f"state codec writes datetime.timezone and zoneinfo.ZoneInfo zones (with a key); "
            f"convert the value or give the store a serde")


_KINDS = {_ENUM: "an enum", _NAMEDTUPLE: "a named tuple", _DATACLASS: "a dataclass"}
_CLASS_NAMES: dict[type, bytes] = {}
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _class_name(kind: type, tag: bytes) -> bytes:
    """The encoded ``module:qualname`` of a class, once checked to resolve back to it."""
    raw = _CLASS_NAMES.get(kind)
    if raw is not None:
        return raw
    name = f"{kind.__module__}:{kind.__qualname__}"
    what = _KINDS[tag].split(" ", 1)[1]
    if "<locals>" in kind.__qualname__:
        raise StateCodecError(
            f"cannot write {what} {name} to persistent state: the class is defined inside a "
            f"function, so no later process can find it to read the state back: move it to "
            f"module level (or give the store a serde)")
    try:
        found = _resolve(name, tag, writing=True)
    except StateCodecError as exc:
        raise StateCodecError(
            f"cannot write {what} {name} to persistent state: {exc}, so the state could not "
            f"be read back: define the class at module level under its own name (or give the "
            f"store a serde)") from None
    if found is not kind:
        raise StateCodecError(
            f"cannot write {what} {name} to persistent state: that name finds another object "
            f"({found!r:.60}), so the state could not be read back: define the class at module "
            f"level under its own name (or give the store a serde)")
    if tag == _DATACLASS:
        initvar = getattr(dataclasses, "_FIELD_INITVAR", _MISSING)
        for field in getattr(kind, "__dataclass_fields__", {}).values():
            if (getattr(field, "_field_type", None) is initvar and field.default is
                    dataclasses.MISSING and field.default_factory is dataclasses.MISSING):
                raise StateCodecError(
                    f"cannot write dataclass {name} to persistent state: its __init__ needs "
                    f"InitVar {field.name!r}, which the instance does not keep, so it could not "
                    f"be rebuilt: give the InitVar a default (or give the store a serde)")
    raw = _CLASS_NAMES[kind] = _length(len(name.encode("utf-8")), "class name") + name.encode()
    return raw


def _resolve(name: str, tag: bytes, writing: bool = False) -> Any:
    """The class named ``module:qualname``, found without importing or running anything.

    :raises StateCodecError: naming the class and why it cannot be used.
    """
    module_name, colon, qualname = name.partition(":")
    if not colon or not module_name or not qualname:
        raise StateCodecError(f"corrupt state: class name {name!r} is not module:qualname")
    module = sys.modules.get(module_name)
    if module is None:
        raise StateCodecError(
            f"class {name} is not imported in this process; import it before opening the "
            f"state (the state codec never imports a module because the data names it)")
    found: Any = module
    for part in qualname.split("."):
        try:
            found = vars(found)[part]  # namespaces only: no __getattr__, no descriptor
        except (KeyError, TypeError):
            raise StateCodecError(
                f"class {name} is not found: module {module_name} has no {qualname}"
                + ("" if writing else " (was it renamed or moved since the state was written?)")
            ) from None
    if not isinstance(found, type) or not (
            issubclass(found, Enum) if tag == _ENUM else
            issubclass(found, tuple) and isinstance(getattr(found, "_fields", None), tuple)
            if tag == _NAMEDTUPLE else dataclasses.is_dataclass(found)):
        raise StateCodecError(
            f"{name} is not {_KINDS[tag]} (found {type(found).__name__} {found!r:.60}), which "
            f"the state says it is: the state codec rebuilds only enums, named tuples and "
            f"dataclasses")
    return found


def _dataclass_fields(kind: type) -> tuple[tuple[str, bool], ...]:
    """A dataclass's fields: name and ``init``, in order (cached)."""
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple((f.name, f.init) for f in dataclasses.fields(kind))
    return fields


def _length(n: int, what: str) -> bytes:
    if n > _MAX_LENGTH:
        raise StateCodecError(f"cannot write a {what} of {n} elements or bytes (max 2**32 - 1)")
    return _LENGTH.pack(n)


def _read(data: bytes, at: int) -> tuple[Any, int]:
    tag = data[at:at + 1]
    at += 1
    if tag == _STR:
        return _read_text(data, at)
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
        items, at = _read_items(data, at + 4, n)
        return (tuple(items) if tag == _TUPLE else items), at
    if tag == _DICT:
        (n,) = _LENGTH.unpack_from(data, at)
        flat, at = _read_items(data, at + 4, 2 * n)
        return dict(zip(flat[::2], flat[1::2], strict=True)), at
    if tag == _WINDOW:
        start, end = _BOUNDS.unpack_from(data, at)
        return Window(start, end), at + 16
    if tag == _WINDOWED:
        key, at = _read(data, at)
        start, end = _BOUNDS.unpack_from(data, at)
        return Windowed(key, Window(start, end)), at + 16
    return _read_more(tag, data, at)


_STR_TAG, _INT_TAG, _NONE_TAG, _BYTES_TAG = _STR[0], _INT[0], _NONE[0], _BYTES[0]
_TUPLE_TAG, _LIST_TAG, _DICT_TAG = _TUPLE[0], _LIST[0], _DICT[0]


def _read_items(data: bytes, at: int, n: int) -> tuple[list[Any], int]:
    """:func:`_read` of ``n`` values from ``at``, the common kinds without a call each.

    A str, an int of 64 bits, ``None`` or bytes is read in this loop, a list, tuple or dict
    by this loop over its items (one frame per level of nesting), any other value through
    :func:`_read`. Raises as :func:`_read` for bytes it did not write (``IndexError`` past
    the end).
    """
    items: list[Any] = []
    append = items.append
    size = len(data)
    for _ in range(n):
        tag = data[at]
        if tag == _STR_TAG or tag == _BYTES_TAG:
            start = at + 5
            end = start + _LENGTH.unpack_from(data, at + 1)[0]
            if end > size:
                raise IndexError("text or bytes run past the end")
            append(data[start:end].decode("utf-8") if tag == _STR_TAG else data[start:end])
            at = end
        elif tag == _INT_TAG:
            append(_LONG.unpack_from(data, at + 1)[0])
            at += 9
        elif tag == _NONE_TAG:
            append(None)
            at += 1
        elif tag == _TUPLE_TAG or tag == _LIST_TAG:  # nested: one frame per level
            inner, at = _read_items(data, at + 5, _LENGTH.unpack_from(data, at + 1)[0])
            append(tuple(inner) if tag == _TUPLE_TAG else inner)
        elif tag == _DICT_TAG:
            flat, at = _read_items(data, at + 5, 2 * _LENGTH.unpack_from(data, at + 1)[0])
            append(dict(zip(flat[::2], flat[1::2], strict=True)))
        else:
            item, at = _read(data, at)
            append(item)
    return items, at


def _read_text(data: bytes, at: int) -> tuple[str, int]:
    (n,) = _LENGTH.unpack_from(data, at)
    at += 4
    end = at + n
    if end > len(data):
        raise IndexError("text runs past the end")
    return data[at:end].decode("utf-8"), end


def _read_more(tag: bytes, data: bytes, at: int) -> tuple[Any, int]:
    """:func:`_read` for the tags after the first table's (``at`` is past the tag)."""
    if tag == _DATACLASS:
        name, at = _read_text(data, at)
        kind = _resolve(name, tag)
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        init = dict(_dataclass_fields(kind))
        kwargs: dict[str, Any] = {}
        later: list[tuple[str, Any]] = []
        for _ in range(n):
            field, at = _read_text(data, at)
            if field not in init:
                raise StateCodecError(
                    f"dataclass {name} has no field {field!r}, which the state has (written "
                    f"by another version of the class?)")
            item, at = _read(data, at)
            if init[field]:
                kwargs[field] = item
            else:
                later.append((field, item))
        try:
            value = kind(**kwargs)
            for field, item in later:
                object.__setattr__(value, field, item)
        except Exception as exc:
            raise StateCodecError(f"rebuilding dataclass {name} from state failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        return value, at
    if tag == _ENUM:
        name, at = _read_text(data, at)
        kind = _resolve(name, tag)
        item, at = _read(data, at)
        try:
            return kind(item), at
        except Exception as exc:
            raise StateCodecError(f"enum {name} has no member of value {item!r}, which the "
                                  f"state has (written by another version of the class?)"
                                  ) from exc
    if tag == _NAMEDTUPLE:
        name, at = _read_text(data, at)
        kind = _resolve(name, tag)
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        items = []
        for _ in range(n):
            item, at = _read(data, at)
            items.append(item)
        if n != len(kind._fields):
            raise StateCodecError(
                f"named tuple {name} has {len(kind._fields)} fields, the state has {n} "
                f"(written by another version of the class?)")
        try:
            return kind._make(items), at
        except Exception as exc:
            raise StateCodecError(f"rebuilding named tuple {name} from state failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
    if tag == _DATETIME or tag == _TIME:
        if tag == _DATETIME:
            year, month, day = _DAY.unpack_from(data, at)
            at += 4
        hour, minute, second, microsecond, fold = _CLOCK.unpack_from(data, at)
        zone, at = _read(data, at + 8)
        if zone is not None and type(zone) is not timezone and type(zone) is not ZoneInfo:
            raise TypeError(f"a tzinfo of type {type(zone).__name__}")
        if tag == _DATETIME:
            return datetime(year, month, day, hour, minute, second, microsecond, zone,
                            fold=fold), at
        return time(hour, minute, second, microsecond, zone, fold=fold), at
    if tag == _DATE:
        return date(*_DAY.unpack_from(data, at)), at + 4
    if tag == _TIMEDELTA:
        days, seconds, microseconds = _SPAN.unpack_from(data, at)
        if seconds >= 86400 or microseconds >= 1_000_000:
            raise ValueError("a timedelta written in a form the codec never writes")
        return timedelta(days, seconds, microseconds), at + 12
    if tag == _SET or tag == _FROZENSET:
        (n,) = _LENGTH.unpack_from(data, at)
        at += 4
        items = []
        last = b""
        for _ in range(n):
            start = at
            item, at = _read(data, at)
            if data[start:at] < last:
                raise ValueError("set items out of the order the codec writes")
            last = data[start:at]
            items.append(item)
        out = set(items) if tag == _SET else frozenset(items)
        if len(out) != n:
            raise ValueError("a set with an item twice")
        return out, at
    if tag == _DECIMAL:
        text, at = _read_text(data, at)
        try:
            number = Decimal(text)
        except InvalidOperation as exc:
            raise ValueError(f"not a decimal: {text[:40]!r}") from exc
        if str(number) != text:
            raise ValueError("a decimal written in a form the codec never writes")
        return number, at
    if tag == _TIMEZONE:
        (offset,) = _LONG.unpack_from(data, at)
        name, at = _read(data, at + 8)
        delta = timedelta(microseconds=offset)
        if name is None:
            return timezone(delta), at
        if type(name) is not str or name == timezone(delta).tzname(None):
            raise ValueError("a timezone name written in a form the codec never writes")
        return timezone(delta, name), at
    if tag == _ZONEINFO:
        key, at = _read_text(data, at)
        try:
            return ZoneInfo(key), at
        except (KeyError, ValueError, OSError) as exc:
            raise StateCodecError(f"time zone {key[:60]!r} is not known in this process "
                                  f"({type(exc).__name__}: {exc}): install tzdata?") from exc
    raise IndexError(f"unknown tag {tag!r} at byte {at - 1}")
