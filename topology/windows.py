"""Window definitions and windowed keys.

Times are ``int`` milliseconds; every duration also accepts :class:`datetime.timedelta`.
Time windows are half-open ``[start, end)`` and aligned to the epoch (0). Whether a window is
closed is decided by :func:`suppress.time.is_window_closed`, the one close rule shared by the
windowed aggregations and ``until_window_closes``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, NamedTuple, final

from suppress.time import to_millis

__all__ = ("SessionWindows", "SlidingWindows", "TimeWindows", "Window", "Windowed")

Duration = int | _dt.timedelta


class Window(NamedTuple):
    """A window's bounds in ms. ``end`` is exclusive for time windows.

    An immutable value (a named tuple: cheap to create on the hot path).

    >>> Window(0, 60_000)
    Window(start=0, end=60000)
    """

    start: int
    end: int


class Windowed(NamedTuple):
    """A record key together with the window it was aggregated in; equal by value.

    >>> str(Windowed("k1", Window(0, 2)))
    '[k1@0/2]'
    """

    key: Any
    window: Window

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


@final
class TimeWindows:
    """Fixed-size windows: tumbling by default, hopping with :meth:`advance_by`.

    A record at ``ts`` belongs to every window ``[start, start + size)`` with
    ``start <= ts < start + size``, ``start`` a non-negative multiple of the advance. A window
    closes (accepts no more records; its final result is due) once stream time reaches
    ``end + grace``.
    """

    __slots__ = ("size_ms", "advance_ms", "grace_ms")

    def __init__(self, size_ms: int, advance_ms: int, grace_ms: int) -> None:
        if size_ms <= 0:
            raise ValueError(f"window size must be positive, got {size_ms} ms")
        if not 0 < advance_ms <= size_ms:
            raise ValueError(
                f"window advance must be in (0, size={size_ms}] ms, got {advance_ms} ms"
            )
        self.size_ms = size_ms
        self.advance_ms = advance_ms
        self.grace_ms = grace_ms

    @staticmethod
    def of_size_with_no_grace(size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` ms with no grace period.

        :raises ValueError: for a size that is not positive.
        :raises TypeError: for a size that is neither int nor timedelta.
        """
        s = to_millis(size, "window size")
        return TimeWindows(s, s, 0)

    @staticmethod
    def of_size_and_grace(size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` ms that accept records up to ``grace`` ms late.

        :raises ValueError: for a size that is not positive or a negative grace.
        :raises TypeError: for durations that are neither int nor timedelta.
        """
        s = to_millis(size, "window size")
        return TimeWindows(s, s, to_millis(grace, "grace period"))

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: same size and grace, a new window every ``advance`` ms.

        :raises ValueError: unless ``0 < advance <= size``.
        """
        return TimeWindows(self.size_ms, to_millis(advance, "window advance"), self.grace_ms)

    def window_starts(self, ts: int) -> range:
        """Starts of the windows containing ``ts``, ascending.

        >>> list(TimeWindows.of_size_with_no_grace(10).advance_by(5).window_starts(5))
        [0, 5]
        """
        size, advance = self.size_ms, self.advance_ms
        first = max(0, ts - size + advance) // advance * advance
        return range(first, ts + 1, advance)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimeWindows):
            return NotImplemented
        return (self.size_ms, self.advance_ms, self.grace_ms) == (
            other.size_ms, other.advance_ms, other.grace_ms)

    def __hash__(self) -> int:
        return hash((self.size_ms, self.advance_ms, self.grace_ms))

    def __repr__(self) -> str:
        return (f"TimeWindows(size={self.size_ms}, advance={self.advance_ms}, "
                f"grace={self.grace_ms})")


@final
class SlidingWindows:
    """Windows of a fixed time difference around each record, both ends inclusive.

    A record at ``t`` defines the window ``[t - d, t]``. Aggregating over sliding windows
    arrives with the windows issue; until then ``windowed_by`` refuses them at definition time.
    """

    __slots__ = ("time_difference_ms", "grace_ms")

    def __init__(self, time_difference_ms: int, grace_ms: int) -> None:
        self.time_difference_ms = time_difference_ms
        self.grace_ms = grace_ms

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` ms, no grace period.

        :raises ValueError: for a negative difference.
        """
        return SlidingWindows(to_millis(time_difference, "time difference"), 0)

    @staticmethod
    def of_time_difference_and_grace(time_difference: Duration, grace: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` ms accepting records ``grace`` ms late.

        :raises ValueError: for a negative difference or grace.
        """
        return SlidingWindows(to_millis(time_difference, "time difference"),
                              to_millis(grace, "grace period"))

    def __repr__(self) -> str:
        return f"SlidingWindows(time_difference={self.time_difference_ms}, grace={self.grace_ms})"


@final
class SessionWindows:
    """Sessions of activity separated by at least ``gap`` ms of inactivity, ends inclusive.

    Records ``gap`` ms apart or closer merge into one session. A session closes once stream
    time reaches ``end + 1 + gap + grace``. Aggregating over sessions arrives with the windows
    issue; until then ``windowed_by`` refuses them at definition time.
    """

    __slots__ = ("gap_ms", "grace_ms")

    def __init__(self, gap_ms: int, grace_ms: int) -> None:
        if gap_ms <= 0:
            raise ValueError(f"session inactivity gap must be positive, got {gap_ms} ms")
        self.gap_ms = gap_ms
        self.grace_ms = grace_ms

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` ms and no grace period.

        :raises ValueError: for a gap that is not positive.
        """
        return SessionWindows(to_millis(gap, "inactivity gap"), 0)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` ms accepting records ``grace`` ms late.

        :raises ValueError: for a gap that is not positive or a negative grace.
        """
        return SessionWindows(to_millis(gap, "inactivity gap"), to_millis(grace, "grace period"))

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.gap_ms}, grace={self.grace_ms})"
