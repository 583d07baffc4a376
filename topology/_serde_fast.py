"""Fast paths of the built-in serdes: the same results and errors, less work.

Only for built-in serdes (:class:`~topology._builtin_serdes._NamedSerde`), whose functions run
no user code:

- a serializer with the common case first (:func:`serializer_of`: ``Serdes.long()``,
  ``Serdes.string()`` and time-windowed serdes over them), and which serializers run no user
  code (:func:`runs_no_user_code`, :func:`long_packer_of`);
- a reader of a whole list of ``bytes`` at once (:func:`many_deserializer_of`);
- a check that a reader reads back, from a writer's bytes, the values written
  (:func:`reads_back_as_written`), so that the values themselves may be taken;
- ``deserialize(serialize(v))`` without the bytes (:func:`round_trip_of`), and a check that it
  gives back every value of a list itself (:func:`round_trip_keeps_of`).

Importing this module gives ``Serdes.long()`` and ``Serdes.string()`` their fast paths
(:mod:`topology.serde` imports it); ``Serdes.time_windowed`` builds those of a time-windowed
serde over them with :func:`_fast_time_windowed`, :func:`_many_time_windowed` and
:func:`_time_windowed_read_back`.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._builtin_serdes import _LONG, _PACK_LONG, _STRING, _NamedSerde
from ._key_bytes import fallback_key_bytes, fallback_value_bytes
from .windows import LONG_MAX, Window, Windowed

if TYPE_CHECKING:
    from .serde import Serde


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


# -- round trips without the bytes ------------------------------------------------------------


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
