"""Time segments: how segmented stores group window starts (ms) for physical expiry.

A segmented store drops a whole segment, a contiguous range of times, once every time in it
is past retention, instead of removing windows one by one. The versioned store's segment
helpers (``default_segment_interval``, ``segment_id``) live in :mod:`topology.state.versioned`.
"""

from __future__ import annotations

__all__ = ("check_store_durations", "window_segment_interval")

MIN_WINDOW_SEGMENT_INTERVAL_MS = 60_000
"""Kafka's smallest default segment interval for window and session stores (ms)."""


def window_segment_interval(retention_ms: int) -> int:
    """Return Kafka's default segment interval (ms) of a window or session store.

    ``max(retention_ms // 2, 60 000)``, as ``Stores.persistentWindowStore`` chooses it: at
    most three segments are live at once, and a short retention does not make tiny segments.

    Runtime complexity: O(1).

    >>> window_segment_interval(1_000), window_segment_interval(86_400_000)
    (60000, 43200000)
    """
    return max(retention_ms // 2, MIN_WINDOW_SEGMENT_INTERVAL_MS)


def check_store_durations(*durations: tuple[str, object, int]) -> None:
    """Check a store's duration arguments, each ``(name, value, least)``, in order.

    :raises TypeError: a value is not an ``int`` (of ms).
    :raises ValueError: a value is below its least.
    """
    for what, value, least in durations:
        if type(value) is not int:
            raise TypeError(f"{what} is an int (ms), got {type(value).__name__}")
        if value < least:
            raise ValueError(f"{what} is at least {least} ms, got {value}")
