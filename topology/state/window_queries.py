"""Window store queries shared by every backend: the forms of ``fetch`` and their order.

``fetch`` takes one of three forms, told apart by the number of arguments (Kafka's
``ReadOnlyWindowStore`` overloads):

* ``fetch(key, start)``: the value in the window of ``key`` starting at ``start``, or
  ``None``;
* ``fetch(key, time_from, time_to)``: ``(window start, value)`` for the windows of ``key``
  starting in ``[time_from, time_to]``, by start;
* ``fetch(key_from, key_to, time_from, time_to)``: ``(Windowed, value)`` for the keys in
  ``[key_from, key_to]`` (serialized bytes): in memory by window start, then key bytes; on
  RocksDB by segment, then key bytes, then window start (Kafka's two stores' orders).

``backward_fetch`` takes the two range forms and gives exactly the reversed sequence.
``fetch_all(time_from, time_to)`` and ``all()`` are ordered as a key range. Every
bound is inclusive and ``None`` is open-ended; times are ``int`` ms.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ("KEY", "KEY_RANGE", "POINT", "WindowQuery", "check_time_bound", "parse_window_fetch")

POINT = "point"
KEY = "key"
KEY_RANGE = "key-range"


class WindowQuery(NamedTuple):
    """A parsed ``fetch``: its form (``"point"``, ``"key"``, ``"key-range"``) and bounds."""

    form: str
    key_from: Any
    key_to: Any
    time_from: int | None
    time_to: int | None


def check_time_bound(value: Any, what: str) -> int | None:
    """``value`` if it is ``None`` or an ``int`` (ms; ``bool`` is refused).

    >>> check_time_bound(5, "time_from"), check_time_bound(None, "time_to")
    (5, None)

    :raises TypeError: for anything else.
    """
    if value is None or type(value) is int:
        return value
    raise TypeError(f"{what} is an int (ms) or None, got {type(value).__name__}")


def parse_window_fetch(method: str, args: tuple[Any, ...], point: bool) -> WindowQuery:
    """Parse the arguments of ``fetch`` (``point=True``) or ``backward_fetch``.

    >>> parse_window_fetch("fetch", ("a", 0, None), True)
    WindowQuery(form='key', key_from='a', key_to='a', time_from=0, time_to=None)

    :raises TypeError: another number of arguments, a ``None`` single key, or a time that
        is neither an ``int`` nor ``None`` (a point fetch needs an ``int``).
    """
    count = len(args)
    if count == 2 and point:
        key, start = args
        if type(start) is not int:
            raise TypeError(f"{method}(key, start): start is an int (ms), got "
                            f"{type(start).__name__}")
        return WindowQuery(POINT, key, key, start, start)
    if count == 3:
        key, time_from, time_to = args
        if key is None:
            raise TypeError(f"{method}(key, time_from, time_to): the key is None; "
                            f"{method}(None, None, time_from, time_to) fetches every key")
        return WindowQuery(KEY, key, key, check_time_bound(time_from, "time_from"),
                           check_time_bound(time_to, "time_to"))
    if count == 4:
        key_from, key_to, time_from, time_to = args
        return WindowQuery(KEY_RANGE, key_from, key_to, check_time_bound(time_from, "time_from"),
                           check_time_bound(time_to, "time_to"))
    forms = "(key, start), " if point else ""
    raise TypeError(f"{method}() takes {forms}(key, time_from, time_to) or (key_from, key_to, "
                    f"time_from, time_to), got {count} arguments")
