"""Session store semantics shared by every backend: sessions, queries, order and retention.

A *session* is a key together with a window ``[start, end]`` whose two ends are inclusive
(ms), written as ``Windowed(key, Window(start, end))``; ``start == end`` is a session of one
record. A session store maps sessions to aggregates (Kafka's ``SessionStore``). The windowed
session aggregation looks sessions up with :meth:`find_sessions`: every session of a key
whose end is at or after ``earliest_session_end`` and whose start is at or before
``latest_session_start``, both bounds inclusive.

**Order.** Every query returns ``(Windowed, aggregate)`` pairs ordered by the serialized key
(unsigned bytes), then the session end, then the session start; the ``backward_*`` form of a
query returns exactly the reversed sequence. ``None`` bounds are open-ended.

**Retention.** The store's observed stream time is the largest session end ever written
(``-1`` before the first write). A session with ``end <= observed - retention_ms`` is
expired: queries skip it and a write to it is ignored (Kafka drops it the same way).
Physically, sessions are dropped a segment of end times at a time (see
:func:`~topology.state.segments.window_segment_interval`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from ..windows import Window, Windowed

__all__ = ("MAX_TIME", "MIN_TIME", "SessionQueries", "SessionQuery", "make_session",
           "parse_fetch", "parse_find", "session_parts")

MIN_TIME = -(2**63)
"""The smallest session time (ms) a store accepts."""
MAX_TIME = 2**63 - 1
"""The largest session time (ms) a store accepts."""


class SessionQuery(NamedTuple):
    """A parsed session query: a key range and the time bounds (all inclusive, ``None`` open).

    ``single`` says whether one key was named (``key_from`` is then that key).
    """

    single: bool
    key_from: Any
    key_to: Any
    earliest_end: int | None
    latest_start: int | None


def _time(value: Any, what: str) -> int | None:
    """``value`` if it is ``None`` or an ``int`` ms in ``[MIN_TIME, MAX_TIME]``.

    :raises TypeError: for anything else (``bool`` included).
    :raises ValueError: out of range.
    """
    if value is None:
        return None
    if type(value) is not int:
        raise TypeError(f"{what} is an int (ms) or None, got {type(value).__name__}")
    if not MIN_TIME <= value <= MAX_TIME:
        raise ValueError(f"{what} must be in [-2**63, 2**63), got {value}")
    return value


def parse_find(method: str, args: tuple[Any, ...]) -> SessionQuery:
    """Parse the arguments of ``find_sessions``/``backward_find_sessions``.

    ``(key, earliest_session_end, latest_session_start)`` or ``(key_from, key_to,
    earliest_session_end, latest_session_start)``.

    >>> parse_find("find_sessions", ("a", 0, 10))
    SessionQuery(single=True, key_from='a', key_to='a', earliest_end=0, latest_start=10)

    :raises TypeError: another number of arguments, a ``None`` single key, or a time that is
        neither an ``int`` nor ``None``.
    :raises ValueError: a time outside ``[-2**63, 2**63)``.
    """
    if len(args) == 3:
        key, earliest, latest = args
        if key is None:
            raise TypeError(f"{method}(key, ...): the key is None; name a key range "
                            f"{method}(key_from, key_to, ...) with None bounds for every key")
        return SessionQuery(True, key, key, _time(earliest, "earliest_session_end"),
                            _time(latest, "latest_session_start"))
    if len(args) == 4:
        key_from, key_to, earliest, latest = args
        return SessionQuery(False, key_from, key_to, _time(earliest, "earliest_session_end"),
                            _time(latest, "latest_session_start"))
    raise TypeError(f"{method}() takes (key, earliest_session_end, latest_session_start) or "
                    f"(key_from, key_to, earliest_session_end, latest_session_start), got "
                    f"{len(args)} arguments")


def parse_fetch(method: str, args: tuple[Any, ...]) -> SessionQuery:
    """Parse the arguments of ``fetch``/``backward_fetch``: ``(key)`` or ``(key_from, key_to)``.

    >>> parse_fetch("fetch", (None, "b"))
    SessionQuery(single=False, key_from=None, key_to='b', earliest_end=None, latest_start=None)

    :raises TypeError: another number of arguments, or a ``None`` single key.
    """
    if len(args) == 1:
        if args[0] is None:
            raise TypeError(f"{method}(key): the key is None; {method}(None, None) fetches "
                            "every key")
        return SessionQuery(True, args[0], args[0], None, None)
    if len(args) == 2:
        return SessionQuery(False, args[0], args[1], None, None)
    raise TypeError(f"{method}() takes (key) or (key_from, key_to), got {len(args)} arguments")


def session_parts(session: Any, method: str) -> tuple[Any, int, int]:
    """``(key, start, end)`` of a ``Windowed(key, Window(start, end))`` session.

    >>> session_parts(Windowed("a", Window(0, 5)), "put")
    ('a', 0, 5)

    :raises TypeError: ``session`` is not a :class:`~topology.Windowed`, its key is ``None``,
        or a bound is not an ``int``.
    :raises ValueError: ``start > end``, or a bound outside ``[-2**63, 2**63)``.
    """
    if session.__class__ is Windowed:
        key, (start, end) = session
        if (key is not None and type(start) is int and type(end) is int
                and MIN_TIME <= start <= end <= MAX_TIME):
            return key, start, end
    _refuse_session(session, method)
    raise AssertionError("unreachable: _refuse_session raises")


def _refuse_session(session: Any, method: str) -> None:
    """Raise the error that says why ``session`` is not a valid session."""
    if session.__class__ is not Windowed:
        raise TypeError(f"{method}() takes a session Windowed(key, Window(start, end)), got "
                        f"{type(session).__name__}")
    key, (start, end) = session
    if key is None:
        raise TypeError(f"{method}(): a session's key is not None")
    for what, value in (("start", start), ("end", end)):
        if type(value) is not int:
            raise TypeError(f"{method}(): a session's {what} is an int (ms), got "
                            f"{type(value).__name__}")
        if not MIN_TIME <= value <= MAX_TIME:
            raise ValueError(f"{method}(): session {what} {value} is outside [-2**63, 2**63)")
    raise ValueError(f"{method}(): a session's start {start} is after its end {end}")


_new = tuple.__new__


def make_session(key: Any, start: int, end: int) -> Windowed:
    """The windowed key of a session: ``Windowed(key, Window(start, end))``, end inclusive.

    Builds the named tuples directly (a third of the cost of their constructors); for
    results built in bulk.

    >>> make_session("a", 0, 5) == Windowed("a", Window(0, 5))
    True
    """
    result: Windowed = _new(Windowed, (key, _new(Window, (start, end))))
    return result


class SessionQueries(ABC):
    """The query methods of every session store, on its backend's :meth:`_sessions`.

    A backend answers one parsed :class:`SessionQuery` in either direction; the argument
    forms, their checks and the order are this class's, so they are the same on every
    backend.
    """

    @abstractmethod
    def _sessions(self, query: SessionQuery, reverse: bool) -> Iterator[tuple[Windowed, Any]]:
        """The live sessions matching ``query``, in key bytes, end, start order or reversed.

        :raises StoreClosedError: the store is closed.
        """

    def _find(self, args: tuple[Any, ...], method: str, reverse: bool
              ) -> Iterator[tuple[Windowed, Any]]:
        """The sessions of ``find_sessions(*args)``; a backend may answer common forms faster."""
        return self._sessions(parse_find(method, args), reverse)

    @abstractmethod
    def _check_open(self) -> None:
        """:raises StoreClosedError: the store is closed."""

    @abstractmethod
    def _write(self, key: Any, start: int, end: int, aggregate: Any) -> None:
        """Store (``None``: remove) the session ``[start, end]`` of ``key``, the store open."""

    # -- what a session aggregation reads and writes: sessions as plain numbers --------------

    def near(self, key: Any, earliest_end: int, latest_start: int
             ) -> Sequence[tuple[int, int, Any]]:
        """``find_sessions(key, earliest_end, latest_start)`` as ``(end, start, aggregate)``.

        The same sessions in the same order, without windowed keys (ms, both bounds
        inclusive and within ``[MIN_TIME, MAX_TIME]``).

        :raises StoreClosedError: the store is closed.
        """
        return [(session[1][1], session[1][0], aggregate)
                for session, aggregate in self.find_sessions(key, earliest_end, latest_start)]

    def put_session(self, key: Any, start: int, end: int, aggregate: Any) -> None:
        """``put(Windowed(key, Window(start, end)), aggregate)`` of a valid session.

        ``None`` removes the session. ``key`` is not ``None`` and ``start <= end`` (ms).

        :raises StoreClosedError: the store is closed.
        """
        self._check_open()
        self._write(key, start, end, aggregate)

    def find_sessions(self, *args: Any) -> Iterator[tuple[Windowed, Any]]:
        """Sessions ending at or after one time and starting at or before another.

        ``find_sessions(key, earliest_session_end, latest_session_start)`` or
        ``find_sessions(key_from, key_to, earliest_session_end, latest_session_start)``:
        ``(Windowed, aggregate)`` of every live session with ``end >= earliest_session_end``
        and ``start <= latest_session_start`` (ms, inclusive; ``None`` is open), for one key
        or for keys in ``[key_from, key_to]`` (serialized bytes, ``None`` open). One key's
        sessions by end, then start; a key range in memory by end, then key bytes, then start,
        on RocksDB by segment, then key bytes, end, start (Kafka's orders); the result is the
        store as of the call.

        :raises StoreClosedError: the store is closed.
        :raises TypeError: another number of arguments, a ``None`` single key, a time that
            is not an ``int`` or ``None``.
        """
        return self._find(args, "find_sessions", False)

    def backward_find_sessions(self, *args: Any) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`find_sessions`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        """
        return self._find(args, "backward_find_sessions", True)

    def fetch(self, *args: Any) -> Iterator[tuple[Windowed, Any]]:
        """``fetch(key)`` or ``fetch(key_from, key_to)``: every live session of the key(s).

        Ordered as :meth:`find_sessions`; ``None`` key bounds are open
        (``fetch(None, None)`` is every session).

        :raises StoreClosedError: the store is closed.
        :raises TypeError: another number of arguments, or ``fetch(None)``.
        """
        return self._sessions(parse_fetch("fetch", args), False)

    def backward_fetch(self, *args: Any) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`fetch`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        """
        return self._sessions(parse_fetch("backward_fetch", args), True)

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        """Every live session, as ``fetch(None, None)``.

        :raises StoreClosedError: the store is closed.
        """
        return self.fetch(None, None)

    def backward_all(self) -> Iterator[tuple[Windowed, Any]]:
        """:meth:`all`, exactly reversed.

        :raises StoreClosedError: the store is closed.
        """
        return self.backward_fetch(None, None)
