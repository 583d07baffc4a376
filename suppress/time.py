"""Time in the suppression engine: durations, stream time and THE window-close rule.

Every duration is an ``int`` number of milliseconds or a :class:`datetime.timedelta`.

The close rule lives here and nowhere else: :func:`is_window_closed`. A window whose
*exclusive* end is ``e`` (for inclusive-end windows, sliding and session, ``e = end + 1``)
closes once the observed stream time ``T`` satisfies ``T >= e + D``, where ``D`` is the grace
period (sessions: grace + gap). Every path that closes a window calls it: the windowed
aggregations, to reject records for closed windows, and ``until_window_closes``, to emit
buffered windows (their buffer time is the exclusive end). They therefore agree to the
millisecond.

``until_time_limit`` has its own rule, :func:`is_time_limit_reached`.
"""

from __future__ import annotations

import datetime as _dt

__all__ = ("NO_TIMESTAMP", "is_time_limit_reached", "is_window_closed", "last_closed_end",
           "to_millis", "window_close_time")

NO_TIMESTAMP = -1
"""Stream time before any record was observed (Kafka's ``ConsumerRecord.NO_TIMESTAMP``)."""


def to_millis(value: int | _dt.timedelta, what: str) -> int:
    """Return a non-negative duration in milliseconds.

    :param value: an ``int`` of milliseconds or a ``timedelta`` (sub-millisecond parts are
        truncated).
    :param what: the name used in error messages.
    :raises TypeError: for any other type (``bool`` and ``float`` included).
    :raises ValueError: for a negative duration.

    >>> to_millis(_dt.timedelta(seconds=2), "grace")
    2000
    >>> to_millis(5, "grace")
    5
    """
    if isinstance(value, _dt.timedelta):
        ms = value // _dt.timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise TypeError(
            f"{what} must be an int of milliseconds or a datetime.timedelta, "
            f"got {type(value).__name__}: {value!r}"
        )
    if ms < 0:
        raise ValueError(f"{what} must not be negative, got {ms} ms")
    return ms


def is_window_closed(exclusive_end: int, delay: int, stream_time: int) -> bool:
    """Tell whether a window with exclusive end ``exclusive_end`` is closed.

    ``delay`` is the grace period (sessions: grace + inactivity gap), all in ms. A closed
    window accepts no more records and its final result is due.

    >>> is_window_closed(10, 2, 11)
    False
    >>> is_window_closed(10, 2, 12)
    True
    """
    return stream_time >= window_close_time(exclusive_end, delay)


def window_close_time(exclusive_end: int, delay: int) -> int:
    """The stream time (ms) at which a window with exclusive end ``exclusive_end`` closes.

    :func:`is_window_closed` is ``stream_time >= window_close_time(end, delay)``; a hot path
    may keep this threshold for a window it updates many times.

    >>> window_close_time(10, 2)
    12
    """
    return exclusive_end + delay


def last_closed_end(delay: int, stream_time: int) -> int:
    """The largest exclusive end (ms) of a window that is closed at ``stream_time``.

    :func:`is_window_closed` is ``exclusive_end <= last_closed_end(delay, stream_time)``; a
    hot path that checks many windows against one stream time may compute it once.

    >>> last_closed_end(2, 12), is_window_closed(10, 2, 12), is_window_closed(11, 2, 12)
    (10, True, False)
    """
    return stream_time - delay


def is_time_limit_reached(first_time: int, time_limit: int, stream_time: int) -> bool:
    """Tell whether a key first buffered at ``first_time`` is due under ``until_time_limit``.

    Due once ``first_time <= T - time_limit`` (all in ms): updates do not restart the timer.

    >>> is_time_limit_reached(0, 10, 9)
    False
    >>> is_time_limit_reached(0, 10, 10)
    True
    """
    return first_time <= stream_time - time_limit
