"""What a serde's error says: :class:`SerdeError`, and a value shown by its type and a prefix.

A :class:`SerdeError` never holds the whole value: it shows the value's type, length and the
``repr`` of its first 40 characters or bytes (:func:`_describe`), and at most 200 characters
of the underlying exception's message (:func:`_reason`). The built-in serdes
(:mod:`topology._builtin_serdes`), the bytes of keys without a serde
(:mod:`topology._key_bytes`) and the topic helpers of :mod:`topology.serde` write their
messages with these. Public as ``topology.serde.SerdeError``.
"""

from __future__ import annotations

import reprlib
from itertools import islice

from .errors import TopologyError

_PREFIX = 40
"""How many characters or bytes of a value an error message shows."""
_REASON = 200
"""How many characters of the underlying exception's message an error message shows."""


class SerdeError(TopologyError):
    """A value that its serde cannot write, or bytes it cannot read.

    The message names the serde and shows the value's type, length and first 40 characters
    or bytes, never the whole value. ``topic`` is the topic of the record, when known.
    """

    __module__ = "topology.serde"  # its public home: the name tracebacks and pickles show

    def __init__(self, message: str, *, topic: str | None = None) -> None:
        super().__init__(message)
        self.topic = topic


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

