"""Window definitions and windowed keys.

Times are ``int`` milliseconds; every duration also accepts :class:`datetime.timedelta`.
Time windows are half-open ``[start, end)`` and aligned to the epoch (0). Whether a window is
closed is decided by :func:`suppress.time.is_window_closed`, the one close rule shared by the
windowed aggregations and ``until_window_closes``.

Every duration given to a window definition, through a factory or the constructor, is checked
by one function (:func:`_millis`): an ``int`` of ms or a ``timedelta``, never ``bool`` or
``float``, never negative, at most ``2**63 - 1`` ms (Kafka's ``long``). On top of that, as in
Kafka Streams 3.9: a time window's size must be larger than zero and its advance in
``(0, size]``; a session's inactivity gap must be larger than zero; a sliding window's time
difference may be zero.

:class:`Window` and :class:`Windowed` are named tuples underneath (cheap to create and to
hash), but they are equal only to their own kind: ``Windowed("a", Window(0, 1)) != ("a", (0,
1))``.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, final

from suppress.time import to_millis

__all__ = ("SessionWindows", "SlidingWindows", "TimeWindows", "Window", "Windowed")

if TYPE_CHECKING:  # PEP 696 default: a bare ``Windowed`` is ``Windowed[Any]``
    from typing_extensions import TypeVar

    K = TypeVar("K", default=Any)
else:  # typing.TypeVar takes ``default`` from Python 3.13 on only
    from typing import TypeVar

    K = TypeVar("K")

Duration = int | _dt.timedelta
LONG_MAX = 2**63 - 1
"""The largest duration in ms (Kafka's ``Long.MAX_VALUE``)."""

_tuple_eq = tuple.__eq__
_tuple_ne = tuple.__ne__



def time_window_end(start: int, size: int) -> int:
    """The end of the time window of ``size`` ms that starts at ``start``, capped at 2**63 - 1.

    Kafka caps a window end that would pass the largest timestamp the same way
    (``WindowKeySchema.timeWindowForSize``): such a window never closes.

    >>> time_window_end(100, 50), time_window_end(2**63 - 10, 100) == 2**63 - 1
    (150, True)
    """
    end = start + size
    return end if end <= LONG_MAX else LONG_MAX

class _WindowBounds(NamedTuple):
    start: int
    end: int


class _WindowedParts(NamedTuple, Generic[K]):
    key: K
    window: Window


@final
class Window(_WindowBounds):
    """A window's bounds in ms. ``end`` is exclusive for time windows.

    An immutable value, equal to another :class:`Window` with the same bounds and to nothing
    else (not to the plain tuple ``(start, end)``); hashable. Runtime complexity of ``==``
    and ``hash``: O(1).

    >>> Window(0, 60_000)
    Window(start=0, end=60000)
    >>> Window(0, 60_000) == (0, 60_000)
    False
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is Window:
            return _tuple_eq(self, other)
        return False if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        if other.__class__ is Window:
            return _tuple_ne(self, other)
        return True if isinstance(other, tuple) else NotImplemented

    __hash__ = tuple.__hash__  # tuple's C hash (defining __eq__ alone would remove it)


@final
class Windowed(_WindowedParts[K]):
    """A record key together with the window it was aggregated in.

    Generic in the key's type (``Windowed[str]``): a windowed aggregation of a
    ``KGroupedStream[K, V]`` is a ``KTable[Windowed[K], ...]``.

    An immutable value, equal to another :class:`Windowed` with an equal key and window and
    to nothing else (not to the plain tuple ``(key, (start, end))``); hashable when the key
    is. ``str()`` is Kafka's ``[key@start/end]``.

    >>> str(Windowed("k1", Window(0, 2)))
    '[k1@0/2]'
    >>> Windowed("k1", Window(0, 2)) == ("k1", (0, 2))
    False
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is Windowed:
            return _tuple_eq(self, other)
        return False if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        if other.__class__ is Windowed:
            return _tuple_ne(self, other)
        return True if isinstance(other, tuple) else NotImplemented

    __hash__ = tuple.__hash__  # tuple's C hash (defining __eq__ alone would remove it)

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


def _millis(value: Duration, what: str, *, positive: bool = False) -> int:
    """Return the duration ``value`` in ms, checked as every window duration is.

    :param positive: refuse zero as well (sizes and gaps).
    :raises TypeError: unless ``value`` is an ``int`` (not ``bool``) or a ``timedelta``.
    :raises ValueError: for a negative duration (or zero, with ``positive``) or one above
        ``2**63 - 1`` ms.
    """
    ms = to_millis(value, what)
    if positive and ms == 0:
        raise ValueError(f"{what} must be larger than zero, got 0 ms")
    if ms > LONG_MAX:
        raise ValueError(f"{what} must be at most {LONG_MAX} ms (a signed 64-bit long), "
                         f"got {ms} ms")
    return ms


class _WindowDefinition:
    """Value semantics shared by the window definitions: equal and hashed by their fields.

    Instances are immutable (attributes are set once, in ``__init__``), so the hash never
    changes; pickling rebuilds them through the constructor, which checks the fields again.
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def _set(self, **values: int) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _WindowDefinition) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((self.__class__.__name__, *self._values()))

    def __reduce__(self) -> tuple[type, tuple[int, ...]]:
        return (self.__class__, self._values())


@final
class TimeWindows(_WindowDefinition):
    """Fixed-size windows: tumbling by default, hopping with :meth:`advance_by`.

    A record at ``ts`` belongs to every window ``[start, start + size)`` with
    ``start <= ts < start + size``, ``start`` a non-negative multiple of the advance. A window
    closes (accepts no more records; its final result is due) once stream time reaches
    ``end + grace``. Equal (and hashed) by size, advance and grace.

    :param size_ms: window size in ms, larger than zero.
    :param advance_ms: distance between window starts in ms, in ``(0, size_ms]``.
    :param grace_ms: how late (ms after the window end) records are still accepted, ``>= 0``.
    :raises TypeError: for a duration that is neither ``int`` nor ``timedelta``.
    :raises ValueError: for a size that is not larger than zero, an advance outside
        ``(0, size]``, a negative grace, or a duration above ``2**63 - 1`` ms.

    >>> TimeWindows.of_size_with_no_grace(10).advance_by(5) == TimeWindows(10, 5, 0)
    True
    """

    __slots__ = ("size_ms", "advance_ms", "grace_ms")
    _fields = __slots__
    size_ms: int
    advance_ms: int
    grace_ms: int

    def __init__(self, size_ms: Duration, advance_ms: Duration, grace_ms: Duration) -> None:
        size = _millis(size_ms, "window size", positive=True)
        advance = _millis(advance_ms, "window advance")
        if not 0 < advance <= size:
            raise ValueError(
                "window advance must be larger than zero and at most the window size, "
                f"{size} ms; got {advance} ms"
            )
        self._set(size_ms=size, advance_ms=advance, grace_ms=_millis(grace_ms, "grace period"))

    @staticmethod
    def of_size_with_no_grace(size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` ms with no grace period.

        :raises ValueError: for a size that is not larger than zero.
        :raises TypeError: for a size that is neither int nor timedelta.
        """
        return TimeWindows(size, size, 0)

    @staticmethod
    def of_size_and_grace(size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` ms that accept records up to ``grace`` ms late.

        :raises ValueError: for a size that is not larger than zero or a negative grace.
        :raises TypeError: for durations that are neither int nor timedelta.
        """
        return TimeWindows(size, size, grace)

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: same size and grace, a new window every ``advance`` ms.

        :raises ValueError: unless ``0 < advance <= size``.
        :raises TypeError: for an advance that is neither int nor timedelta.
        """
        return TimeWindows(self.size_ms, advance, self.grace_ms)

    def window_starts(self, ts: int) -> range:
        """Starts of the windows containing ``ts``, ascending.

        >>> list(TimeWindows.of_size_with_no_grace(10).advance_by(5).window_starts(5))
        [0, 5]
        """
        size, advance = self.size_ms, self.advance_ms
        first = max(0, ts - size + advance) // advance * advance
        return range(first, ts + 1, advance)

    def __repr__(self) -> str:
        return (f"TimeWindows(size={self.size_ms}, advance={self.advance_ms}, "
                f"grace={self.grace_ms})")


@final
class SlidingWindows(_WindowDefinition):
    """Windows of a fixed time difference around each record, both ends inclusive.

    A record at ``t`` defines the window ``[t - d, t]`` (and, when later records are within
    ``d``, the window ``[t + 1, t + 1 + d]`` right after it); records earlier than ``d`` share
    the window ``[0, d]``. ``d`` may be zero, as in Kafka. A window ``[start, end]`` closes
    once stream time reaches ``end + 1 + grace``. Equal (and hashed) by time difference and
    grace.

    :param time_difference_ms: the largest time difference in ms between two records of one
        window, ``>= 0``.
    :param grace_ms: how late records are still accepted in ms, ``>= 0``.
    :raises TypeError: for a duration that is neither ``int`` nor ``timedelta``.
    :raises ValueError: for a negative duration or one above ``2**63 - 1`` ms.
    """

    __slots__ = ("time_difference_ms", "grace_ms")
    _fields = __slots__
    time_difference_ms: int
    grace_ms: int

    def __init__(self, time_difference_ms: Duration, grace_ms: Duration) -> None:
        self._set(time_difference_ms=_millis(time_difference_ms, "window time difference"),
                  grace_ms=_millis(grace_ms, "grace period"))

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` ms, no grace period.

        :raises ValueError: for a negative difference.
        :raises TypeError: for a difference that is neither int nor timedelta.
        """
        return SlidingWindows(time_difference, 0)

    @staticmethod
    def of_time_difference_and_grace(time_difference: Duration, grace: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` ms accepting records ``grace`` ms late.

        :raises ValueError: for a negative difference or grace.
        :raises TypeError: for durations that are neither int nor timedelta.
        """
        return SlidingWindows(time_difference, grace)

    def __repr__(self) -> str:
        return f"SlidingWindows(time_difference={self.time_difference_ms}, grace={self.grace_ms})"


@final
class SessionWindows(_WindowDefinition):
    """Sessions of activity separated by at least ``gap`` ms of inactivity, ends inclusive.

    Records ``gap`` ms apart or closer merge into one session. A session closes once stream
    time reaches ``end + 1 + gap + grace``. Equal (and hashed) by gap and grace.

    :param gap_ms: the inactivity gap in ms, larger than zero.
    :param grace_ms: how late records are still accepted in ms, ``>= 0``.
    :raises TypeError: for a duration that is neither ``int`` nor ``timedelta``.
    :raises ValueError: for a gap that is not larger than zero, a negative grace, or a
        duration above ``2**63 - 1`` ms.
    """

    __slots__ = ("gap_ms", "grace_ms")
    _fields = __slots__
    gap_ms: int
    grace_ms: int

    def __init__(self, gap_ms: Duration, grace_ms: Duration) -> None:
        gap = _millis(gap_ms, "inactivity gap", positive=True)
        self._set(gap_ms=gap, grace_ms=_millis(grace_ms, "grace period"))

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` ms and no grace period.

        :raises ValueError: for a gap that is not larger than zero.
        :raises TypeError: for a gap that is neither int nor timedelta.
        """
        return SessionWindows(gap, 0)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` ms accepting records ``grace`` ms late.

        :raises ValueError: for a gap that is not larger than zero or a negative grace.
        :raises TypeError: for durations that are neither int nor timedelta.
        """
        return SessionWindows(gap, grace)

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap_ms}, grace={self.grace_ms})"
