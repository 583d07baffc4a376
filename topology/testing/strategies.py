"""Hypothesis strategies for keyed, out-of-order streams, and :func:`pipe` to play them.

Every time here is in ms. A stream is a list of ``(key, value, timestamp)`` records in arrival
order. *Stream time* before a record is the largest timestamp among the records before it
(``start`` before the first); a record's *lag* is how far it is behind that
(:func:`lags`). :func:`records` draws streams whose on-time records lag by at most
``max_disorder`` and, when asked, late records that lag by more than ``grace``;
:func:`events` mixes wall-clock advances, ``("advance", ms)``, into such a stream, and
:func:`pipe` feeds the result to a driver.

Needs hypothesis: ``pip install 'suppress-topology[testing]'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

try:
    from hypothesis import strategies as st
except ImportError as _exc:
    raise ImportError(
        "topology.testing.strategies needs hypothesis: "
        "pip install 'suppress-topology[testing]'",
        name=_exc.name,
    ) from _exc

if TYPE_CHECKING:
    from .driver import TopologyTestDriver
    from .topics import TestInputTopic

__all__ = ("Advance", "Event", "Record", "events", "lags", "pipe", "records")

Record = tuple[Any, Any, int]
"""A drawn record: ``(key, value, timestamp)``, the timestamp in ms."""
Advance = tuple[Literal["advance"], int]
"""A wall-clock advance: ``("advance", ms)``."""
Event = Record | Advance
"""An item of :func:`events`: a record or a wall-clock advance."""

DEFAULT_KEYS = st.sampled_from(("a", "b", "c"))
"""A few keys, so that records of one key meet in aggregations and joins."""
DEFAULT_VALUES = st.integers(min_value=0, max_value=9)


def _check(name: str, value: int | None, minimum: int = 0) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or value < minimum):
        raise ValueError(f"{name} must be an int >= {minimum} (ms), got {value!r}")


def records(keys: st.SearchStrategy[Any] = DEFAULT_KEYS,
            values: st.SearchStrategy[Any] = DEFAULT_VALUES, *, start: int = 0,
            span: int = 60_000, max_step: int | None = None, max_disorder: int = 0,
            grace: int | None = None, max_lateness: int | None = None, min_size: int = 0,
            max_size: int = 50) -> st.SearchStrategy[list[Record]]:
    """Lists of ``(key, value, timestamp)`` records, out of order by a bounded amount.

    Guarantees, with stream time and lag as in the module docstring (all in ms):

    - every timestamp lies in ``[start, start + span]``;
    - a record is at most ``max_step`` ms ahead of the stream time before it (default
      ``span``: no limit but the span), so stream time moves in steps of at most ``max_step``;
    - an *on-time* record lags by at most ``max_disorder`` (0: timestamps never decrease);
    - with ``grace`` given (it must be ``>= max_disorder``), about one record in four is
      *late* when it can be (when stream time is past ``start + grace``): it lags by more than
      ``grace`` and at most ``grace + max_lateness`` (``max_lateness`` at least 1, default
      ``span``). Without ``grace`` every record is on time.

    So a record with a lag above ``grace`` is exactly a late one. Keys and values are drawn
    from ``keys`` and ``values`` (default: keys ``"a"``, ``"b"``, ``"c"``, values 0 to 9);
    the list has ``min_size`` to ``max_size`` records. Shrinks towards fewer records, all at
    ``start``, on time.

    :raises ValueError: for a negative time or size, or ``grace < max_disorder``.
    """
    for name, value in (("start", start), ("span", span), ("max_step", max_step),
                        ("max_disorder", max_disorder), ("grace", grace),
                        ("min_size", min_size), ("max_size", max_size)):
        _check(name, value)
    _check("max_lateness", max_lateness, minimum=1)
    if min_size > max_size:
        raise ValueError(f"min_size {min_size} > max_size {max_size}")
    if grace is not None and grace < max_disorder:
        raise ValueError(f"grace ({grace} ms) must be at least max_disorder ({max_disorder} "
                         f"ms): else an on-time record could lag by more than grace")
    step = span if max_step is None else max_step
    lateness = max(1, span) if max_lateness is None else max_lateness
    end = start + span

    @st.composite
    def draw_stream(draw: st.DrawFn) -> list[Record]:
        n = draw(st.integers(min_value=min_size, max_value=max_size))
        out: list[Record] = []
        stream_time = start
        for _ in range(n):
            key = draw(keys)
            value = draw(values)
            if grace is not None and stream_time - grace - 1 >= start and draw(
                    st.integers(min_value=0, max_value=3)) == 3:
                behind = draw(st.integers(min_value=grace + 1, max_value=grace + lateness))
                ts = max(start, stream_time - behind)  # start too is more than grace behind
            else:
                ahead = draw(st.integers(min_value=0, max_value=step))
                behind = draw(st.integers(min_value=0, max_value=max_disorder))
                ts = max(start, min(stream_time + ahead, end) - behind)
                stream_time = max(stream_time, ts)
            out.append((key, value, ts))
        return out

    return draw_stream()


def events(stream: st.SearchStrategy[list[Record]] | None = None, *,
           max_advance: int = 60_000) -> st.SearchStrategy[list[Event]]:
    """A stream of :func:`records` with wall-clock advances mixed in.

    Each item is a record ``(key, value, timestamp)`` or an advance ``("advance", ms)`` of
    1 to ``max_advance`` ms; about one record in four is followed by an advance. The records
    come out in the order ``stream`` drew them, with its guarantees (default: ``records()``).
    Wall-clock time is separate from record timestamps: an advance runs wall-clock
    punctuations and moves no stream time. Play a list with :func:`pipe`.

    :raises ValueError: for ``max_advance < 1``.
    """
    _check("max_advance", max_advance, minimum=1)
    source = records() if stream is None else stream

    @st.composite
    def draw_events(draw: st.DrawFn) -> list[Event]:
        out: list[Event] = []
        for record in draw(source):
            out.append(record)
            if draw(st.integers(min_value=0, max_value=3)) == 3:
                out.append(("advance", draw(st.integers(min_value=1,
                                                        max_value=max_advance))))
        return out

    return draw_events()


def lags(stream: Iterable[Event]) -> list[int]:
    """Each record's lag, in ms: how far it is behind the largest timestamp before it.

    0 for a record at or past that, and for the first record. Advances are skipped: the
    result has one item per record.
    """
    out: list[int] = []
    largest: int | None = None
    for item in stream:
        if len(item) != 3:
            continue  # ("advance", ms)
        ts = item[2]
        out.append(0 if largest is None or ts >= largest else largest - ts)
        largest = ts if largest is None else max(largest, ts)
    return out


def pipe(topic: TestInputTopic, driver: TopologyTestDriver, stream: Iterable[Event]) -> None:
    """Play a stream: pipe its records into ``topic``, advance ``driver``'s wall clock.

    Records ``(key, value, timestamp)`` go to ``topic.pipe_records`` (consecutive ones in one
    call), an item ``("advance", ms)`` to ``driver.advance_wall_clock_time(ms)``, in order.
    """
    batch: list[Record] = []
    for item in stream:
        if len(item) == 3:
            batch.append(item)
        else:  # ("advance", ms)
            if batch:
                topic.pipe_records(batch)
                batch = []
            driver.advance_wall_clock_time(item[1])
    if batch:
        topic.pipe_records(batch)
