r"""One key identity: two keys are the same key exactly when their serialized bytes are equal.

Kafka Streams keys its state by serialized bytes, and so do this library's RocksDB stores and
spill files. Python equality disagrees with bytes for some keys: ``1 == True == 1.0`` while
the fallback encoding gives each its own bytes; ``0.0 == -0.0`` while ``Serdes.double()``
writes two different doubles; ``"a" != b"a"`` while both are the byte ``a``. So that memory,
durable and restarted runs agree, every structure that holds state per key (stores, the
suppression buffer, its changed-key set, the windowed steps' indexes) finds a key through its
*identity* (:func:`key_identity`), not through the key object:

- for ``Serdes.string()``, a key (a ``str``) is its own identity;
- for keys without a serde (:func:`~topology._key_bytes.fallback_key_bytes`), the identity
  of a key is ``canon(its bytes)``: the long that 8 bytes spell when they start with
  ``0x00`` or ``0xFF`` (as the bytes of an ``int`` in ``[-2**56, 2**56)`` do), else the
  bytes decoded as UTF-8 with ``surrogateescape`` (as a ``str`` key's bytes are). So such an
  ``int``, and a ``str`` that does not start with ``"\x00"``, are their own identity, with
  no serialization; another key is serialized once per lookup. ``canon`` is one-to-one: an
  ``int`` and a ``float``, ``bytes`` or ``str`` key with the same 8 bytes are one key, as
  ``"a"`` and ``b"a"`` are;
- for ``Serdes.long()``, a key (an ``int``) is its own identity;
- for windowed serializers (time and session layouts), a :class:`~topology.windows.Windowed`
  key whose inner key is its own identity is itself; otherwise a ``Windowed`` of the inner
  identity and the same window;
- for any other serializer (a user's serde), the bytes.

The common keys (``str`` and ``int`` with their serde or none) cost a type check or two;
the identity of any key is computed without allocating when it is the key.
Lookups by any key with the same bytes find the same entry. The key object a structure
reports is one written with that identity: a suppression buffer keeps the key that created
the entry (until it is emitted), a store the key last written.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import Any

from ._builtin_serdes import _LONG, _STRING
from ._key_bytes import fallback_key_bytes
from ._serde_fast import _serialize_long, _serialize_string
from ._windowed_keys import _SessionWindowedWriter, _TimeWindowedWriter
from .windows import Windowed

__all__ = ("KeyIdentity", "inner_key_identity", "key_identity", "own_identity_type")

KeyIdentity = Callable[[Any], Hashable]
"""``key -> identity``: equal identities exactly for equal serialized bytes."""

_UNPACK_LONG = struct.Struct(">q").unpack
_new_tuple = tuple.__new__


def _utf8_serializers() -> tuple[Callable[[Any], Any], ...]:
    return (_serialize_string, _STRING.serialize)


def _long_serializers() -> tuple[Callable[[Any], Any], ...]:
    return (_serialize_long, _LONG.serialize)


def own_identity_type(serializer: Callable[[Any], Any]) -> type | None:
    """The type whose keys are their own identity under ``serializer`` (``str``, ``int``), if any.

    A hot path may skip :func:`key_identity`'s call for keys of exactly this type.
    """
    if any(serializer is known for known in _utf8_serializers()):
        return str
    if any(serializer is known for known in _long_serializers()):
        return int
    return None


def key_identity(serializer: Callable[[Any], Any]) -> KeyIdentity:
    """The identity function of keys written by ``serializer`` (see the module docstring).

    ``identity(a) == identity(b)`` exactly when ``serializer(a) == serializer(b)``; a key the
    serializer refuses raises the serializer's error. ``None`` (a null key) is its own
    identity.
    """
    if type(serializer) in (_TimeWindowedWriter, _SessionWindowedWriter):
        return _windowed_identity(serializer.inner)  # type: ignore[attr-defined]
    if serializer is fallback_key_bytes:
        return _fallback_identity
    own = own_identity_type(serializer)
    if own is str:
        decode = bytes.decode

        def utf8_identity(key: Any) -> Hashable:
            if key.__class__ is str or key is None:
                return key
            data = serializer(key)
            return None if data is None else decode(data, "utf-8", "surrogateescape")

        return utf8_identity
    if own is int:
        def long_identity(key: Any) -> Hashable:
            if key.__class__ is int or key is None:
                return key
            data = serializer(key)
            return None if data is None else _UNPACK_LONG(data)[0]

        return long_identity

    def bytes_identity(key: Any) -> Hashable:
        if key is None:
            return None
        data = serializer(key)
        if data.__class__ is bytes:
            return data
        if data is None:
            return b""  # no bytes, as the stores and buffers order such a key
        if isinstance(data, bytearray | memoryview):
            return bytes(data)
        return data  # type: ignore[no-any-return]  # not bytes: refused where it is ordered

    return bytes_identity


_SMALL = 2**56
"""An ``int`` in ``[-_SMALL, _SMALL)`` has 8 bytes starting with 0x00 or 0xFF (its own
identity without a serde); a UTF-8 ``str`` never starts with 0xFF, and with 0x00 only when
it starts with ``"\x00"``."""


def _fallback_identity(key: Any) -> Hashable:
    """The identity of a key without a serde, ``canon(its bytes)`` (module docstring)."""
    cls = key.__class__
    if cls is str:
        if key[:1] != "\x00":  # its UTF-8 bytes start neither with 0x00 nor with 0xFF
            return key  # type: ignore[no-any-return]
    elif cls is int:
        if -_SMALL <= key < _SMALL:  # its 8 bytes start with 0x00 or 0xFF
            return key  # type: ignore[no-any-return]
    elif key is None:
        return None
    data = fallback_key_bytes(key)  # raises for a key it cannot write
    if len(data) == 8 and data[0] in (0, 255):
        return _UNPACK_LONG(data)[0]  # type: ignore[no-any-return]
    return data.decode("utf-8", "surrogateescape")


def _windowed_identity(inner: Callable[[Any], Any]) -> KeyIdentity:
    """A windowed key's identity: the inner key's, with the same window."""
    own = own_identity_type(inner)
    inner_identity = key_identity(inner)

    def windowed_identity(key: Any) -> Hashable:
        if key.__class__ is not Windowed:
            return inner_identity(key)  # the serializer raises for it where it is written
        inner_key = key[0]
        if inner_key.__class__ is own:
            return key
        identity = inner_identity(inner_key)
        if identity is inner_key:
            return key
        result: Hashable = _new_tuple(Windowed, (identity, key[1]))
        return result

    return windowed_identity


class _NoType:
    """No key is of this type: the own type of a serializer whose keys never are."""


def inner_key_identity(windowed_serializer: Callable[[Any], Any]
                       ) -> tuple[KeyIdentity | None, type]:
    """``(identity, own type)`` of the inner keys of a windowed key serializer built here.

    ``identity`` is ``None`` for another serializer (a user's windowed serde): the inner
    keys' identity is then not known apart from the window. A key of exactly the ``own`` type
    is its own identity (no key is of ``_NoType``).
    """
    if type(windowed_serializer) not in (_TimeWindowedWriter, _SessionWindowedWriter):
        return None, _NoType
    inner = windowed_serializer.inner  # type: ignore[attr-defined]
    return key_identity(inner), own_identity_type(inner) or _NoType
