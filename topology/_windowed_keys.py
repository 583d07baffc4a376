"""Kafka's windowed key layouts, written once for the serdes, the runtime and the fallback.

A time-windowed key is the inner key's bytes followed by the window start (8 bytes,
big-endian); a session-windowed key is the inner key's bytes followed by the end and the start
(8 bytes each, big-endian). ``Serdes.time_windowed`` / ``Serdes.session_windowed`` and
:func:`~topology.serde.windowed_serializer` write keys with the writers here, the bytes of a
:class:`~topology.windows.Windowed` key without a serde (:mod:`topology._key_bytes`) are the
time-windowed layout, and the runtime asks :func:`time_windowed_parts` and
:func:`session_windowed_inner` for the parts of a writer, to pack a window's bounds once for
many keys.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ._builtin_serdes import _PACK_LONG
from .windows import Windowed

_SESSION_STRUCT = struct.Struct(">qq")


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
