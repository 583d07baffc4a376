"""The built-in serdes: Kafka's byte formats behind :class:`~topology.serde.Serdes`.

:class:`_NamedSerde` is a built-in :class:`~topology.serde.Serde`: a name and a pair of
functions ``T -> bytes -> T``, whose errors become a :class:`~topology.serde.SerdeError`
naming it. The instances here are what ``Serdes.string()``, ``Serdes.long()`` ... return;
:mod:`topology._serde_fast` gives the string and long ones their fast paths.
"""

from __future__ import annotations

import json
import pickle
import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar, final

from ._serde_errors import SerdeError, _describe, _reason

T = TypeVar("T")


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
        from .serde import _built_in  # beside Serdes, which imports this module

        return _built_in, (self.name,)



_LONG_STRUCT = struct.Struct(">q")
_PACK_LONG = _LONG_STRUCT.pack
_UNPACK_LONG = _LONG_STRUCT.unpack
_PACK_DOUBLE = struct.Struct(">d").pack
_UNPACK_DOUBLE = struct.Struct(">d").unpack


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
