"""``topology.testing.strategies``: the guarantees of the drawn streams, and ``pipe``."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import (
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)
from topology.testing import strategies
from topology.testing.plugin import DriverFactory
from topology.testing.strategies import Event, events, lags, pipe, records

PROPERTY = settings(max_examples=examples(100), deadline=None)


def _stream_times(stream: list[Any], start: int) -> list[int]:
    """The stream time before each record: the largest timestamp before it, ``start`` first."""
    out, largest = [], start
    for _, _, ts in stream:
        out.append(largest)
        largest = max(largest, ts)
    return out


@st.composite
def _shapes(draw: st.DrawFn) -> dict[str, Any]:
    """Parameters of ``records``: any valid combination."""
    disorder = draw(st.integers(0, 5_000))
    return {
        "start": draw(st.integers(0, 10**12)),
        "span": draw(st.integers(0, 100_000)),
        "max_step": draw(st.none() | st.integers(0, 20_000)),
        "max_disorder": disorder,
        "grace": draw(st.none() | st.integers(disorder, disorder + 5_000)),
        "max_lateness": draw(st.none() | st.integers(1, 50_000)),
    }


@PROPERTY
@given(st.data())
def test_records_keep_their_guarantees(data: st.DataObject) -> None:
    shape = data.draw(_shapes())
    stream = data.draw(records(st.sampled_from("xy"), st.integers(), **shape, max_size=40))
    start, span, grace = shape["start"], shape["span"], shape["grace"]
    step = span if shape["max_step"] is None else shape["max_step"]
    lateness = max(1, span) if shape["max_lateness"] is None else shape["max_lateness"]
    assert len(stream) <= 40
    for (key, value, ts), before, lag in zip(stream, _stream_times(stream, start), lags(stream),
                                             strict=True):
        assert key in "xy" and isinstance(value, int)
        assert start <= ts <= start + span  # within the span
        assert ts <= before + step  # stream time moves in steps of at most max_step
        assert lag == max(0, before - ts)  # lags() measures against the same stream time
        if grace is None or lag <= grace:
            assert lag <= shape["max_disorder"]  # on time: bounded disorder
        else:
            assert grace < lag <= grace + lateness  # late: behind by more than grace
    times = _stream_times(stream, start)
    assert times == sorted(times)  # stream time never goes back


@PROPERTY
@given(records(max_disorder=0))
def test_no_disorder_means_timestamps_never_decrease(stream: list[Any]) -> None:
    timestamps = [ts for _, _, ts in stream]
    assert timestamps == sorted(timestamps)
    assert all(key in "abc" and 0 <= value <= 9 for key, value, _ in stream)


@PROPERTY
@given(records(max_disorder=300, span=10_000))
def test_without_grace_no_record_is_late(stream: list[Any]) -> None:
    assert all(lag <= 300 for lag in lags(stream))


def test_the_strategies_reach_late_records_and_advances() -> None:
    late = find(records(max_disorder=10, grace=100, span=1_000),
                lambda s: sum(lag > 100 for lag in lags(s)) >= 2)
    assert sum(lag > 100 for lag in lags(late)) >= 2
    disordered = find(records(max_disorder=10), lambda s: any(lags(s)))
    assert 0 < max(lags(disordered)) <= 10
    mixed = find(events(records(min_size=1), max_advance=500),
                 lambda e: any(len(item) == 2 for item in e))
    assert [item for item in mixed if len(item) == 2][0][1] in range(1, 501)


@PROPERTY
@given(events(records(max_disorder=50), max_advance=1_000))
def test_events_are_records_in_order_with_advances_between(items: list[Event]) -> None:
    assert items == [] or len(items[0]) == 3  # an advance follows a record
    for item in items:
        if len(item) == 2:
            assert item[0] == "advance" and 1 <= item[1] <= 1_000
    assert all(lag <= 50 for lag in lags(items))


@pytest.mark.parametrize("kwargs, message", [
    ({"max_disorder": 10, "grace": 5}, "grace .5 ms. must be at least max_disorder"),
    ({"span": -1}, "span must be an int >= 0"),
    ({"start": 1.5}, "start must be an int"),
    ({"max_disorder": True}, "max_disorder must be an int"),
    ({"grace": 5, "max_lateness": 0}, "max_lateness must be an int >= 1"),
    ({"min_size": 3, "max_size": 2}, "min_size 3 > max_size 2"),
])
def test_records_refuses_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        records(**kwargs)


def test_events_refuses_a_zero_advance() -> None:
    with pytest.raises(ValueError, match="max_advance must be an int >= 1"):
        events(max_advance=0)


def test_lags() -> None:
    assert lags([]) == []
    assert lags([("a", 1, 5), ("advance", 100), ("a", 1, 3), ("a", 1, 9), ("a", 1, 0)]) == [
        0, 2, 0, 9]


class _Ticks(Processor):
    """Forwards the wall-clock time of each wall-clock punctuation (every 100 ms)."""

    def init(self, context: ProcessorContext) -> None:
        context.schedule(100, PunctuationType.WALL_CLOCK_TIME, self._tick)

    def _tick(self, now: int) -> None:
        self.context.forward(Record("tick", now, now))

    def process(self, record: Record) -> None:
        self.context.forward(record)


def test_pipe_plays_records_and_advances_in_order(topology_driver: DriverFactory) -> None:
    b = StreamsBuilder()
    b.stream("in").process(_Ticks).to("out")
    d = topology_driver(b.build(), initial_wall_clock_ms=0)
    topic = d.create_input_topic("in")
    pipe(topic, d, [("a", 1, 5), ("b", 2, 3), ("advance", 250), ("c", 3, 9), ("advance", 150)])
    out = d.create_output_topic("out").read_key_values_to_list()
    # one punctuation per advance that reaches its due time (as Kafka's driver)
    assert out == [("a", 1), ("b", 2), ("tick", 250), ("c", 3), ("tick", 400)]


def test_pipe_batches_consecutive_records() -> None:
    calls: list[Any] = []

    class Topic:
        def pipe_records(self, batch: list[Any]) -> None:
            calls.append(list(batch))

    class Driver:
        def advance_wall_clock_time(self, ms: int) -> None:
            calls.append(ms)

    pipe(Topic(), Driver(), [("a", 1, 0), ("b", 1, 1), ("advance", 7), ("advance", 8),  # type: ignore[arg-type]
                             ("c", 1, 2)])
    assert calls == [[("a", 1, 0), ("b", 1, 1)], 7, 8, [("c", 1, 2)]]


SIZE, GRACE = 1_000, 200


@settings(max_examples=examples(50), deadline=None)
@given(events(records(span=10_000, max_step=500, max_disorder=GRACE, grace=SIZE + GRACE)))
def test_windowed_counts_count_the_on_time_records(items: list[Event]) -> None:
    # a record late by more than size + grace always falls in a closed window, and one late by
    # at most grace never does: the counts are those of the on-time records
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE))
     .count().to_stream().to("out"))
    stream = [item for item in items if len(item) == 3]
    on_time = [r for r, lag in zip(stream, lags(stream), strict=True) if lag <= GRACE]
    expected = Counter((key, ts - ts % SIZE) for key, _, ts in on_time)
    with TopologyTestDriver(b.build()) as d:
        pipe(d.create_input_topic("in"), d, items)
        latest = d.create_output_topic("out").read_key_values_to_map()
        assert d.metrics()["dropped-records-total"] == len(stream) - len(on_time)
    assert {(w.key, w.window.start): n for w, n in latest.items()} == expected


def test_without_hypothesis_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "topology.testing.strategies")
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # None: "import hypothesis" fails
    with pytest.raises(ImportError) as info:
        importlib.import_module("topology.testing.strategies")
    assert "pip install 'suppress-topology[testing]'" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)
    assert callable(strategies.records)  # the module imported before is untouched
