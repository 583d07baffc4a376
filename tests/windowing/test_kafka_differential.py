"""Differential properties: random streams through the driver against models of Kafka's
algorithms (:mod:`.kafka_models`) whose stores keep windows for this project's retention.

Every forwarded update (key, window, value, timestamp, in order) and every late drop (the
record and the window the log line and the late-records topic name) must be equal. With
Kafka's own, shorter retention the models reproduce the boundary differences that
docs/kafka-differences.md shows; the two examples there are checked here too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import SessionWindows, SlidingWindows, StreamsBuilder, TopologyTestDriver

from .kafka_models import (
    KafkaSessionAggregate,
    KafkaSlidingAggregate,
    session_retention,
    sliding_retention,
)

Record = tuple[str, str, int]


def _init() -> str:
    return "0"


def _add(key: Any, value: Any, agg: Any) -> str:
    return f"{agg}+{value}"


def _merge(key: Any, agg1: Any, agg2: Any) -> str:
    return f"{agg1}|{agg2}"


def _through_driver(windows: Any, records: list[Record]) -> tuple[list[Any], list[Any]]:
    """The updates and the late drops of ``aggregate`` over ``records`` in the driver."""
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key().windowed_by(windows)
    if isinstance(windows, SessionWindows):
        table = grouped.aggregate(_init, _add, _merge, late_records_to="late")
    else:
        table = grouped.aggregate(_init, _add, late_records_to="late")
    table.to_stream().to("out")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in")
        for key, value, ts in records:
            source.pipe_input(key, value, ts)
        updates = [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
                   for r in driver.create_output_topic("out").read_records_to_list()]
        late = []
        for r in driver.create_output_topic("late").read_records_to_list():
            headers = {name: value or b"" for name, value in r.headers}
            late.append((r.key, r.timestamp, int(headers["late.window.start"]),
                         int(headers["late.window.end"])))
        assert driver.metrics()["dropped-records-total"] == len(late)
    return updates, late


def _records(draw_keys: list[tuple[str, int]]) -> list[Record]:
    return [(key, str(i), ts) for i, (key, ts) in enumerate(draw_keys)]


streams = st.lists(st.tuples(st.sampled_from(["A", "B"]), st.integers(0, 70)), max_size=25)


@settings(max_examples=examples(100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=streams, d=st.integers(0, 12), grace=st.integers(0, 8))
def test_sliding_equals_kafkas_algorithm_with_our_retention(data: list[tuple[str, int]], d: int,
                                                            grace: int) -> None:
    records = _records(data)
    model = KafkaSlidingAggregate(d, grace, _init, _add,
                                  sliding_retention(d, grace, kafka=False))
    for key, value, ts in records:
        model.process(key, value, ts)
    updates, late = _through_driver(SlidingWindows.of_time_difference_and_grace(d, grace),
                                    records)
    assert updates == model.updates
    assert late == model.drops


@settings(max_examples=examples(100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=streams, gap=st.integers(1, 10), grace=st.integers(0, 8))
def test_session_equals_kafkas_algorithm_with_our_retention(data: list[tuple[str, int]],
                                                            gap: int, grace: int) -> None:
    records = _records(data)
    model = KafkaSessionAggregate(gap, grace, _init, _add, _merge,
                                  session_retention(gap, grace, kafka=False))
    for key, value, ts in records:
        model.process(key, value, ts)
    updates, late = _through_driver(SessionWindows.of_inactivity_gap_and_grace(gap, grace),
                                    records)
    assert updates == model.updates
    assert late == model.drops


def test_sliding_retention_boundary_example() -> None:
    """d=10, grace 5: Kafka's store (2d + grace) has hidden A's [85,95] when A@105 arrives."""
    records: list[Record] = [("A", "1", 95), ("B", "1", 109), ("B", "2", 110), ("A", "2", 105)]
    kafka = KafkaSlidingAggregate(10, 5, _init, _add, sliding_retention(10, 5, kafka=True))
    for record in records:
        kafka.process(*record)
    updates, _ = _through_driver(SlidingWindows.of_time_difference_and_grace(10, 5), records)
    assert kafka.updates[-1] == ("A", 95, 105, "0+2", 105)
    assert updates[-2:] == [("A", 96, 106, "0+2", 105), ("A", 95, 105, "0+1+2", 105)]
    assert updates[:-2] == kafka.updates[:-1]


def test_session_retention_boundary_example() -> None:
    """gap 1, grace 0: Kafka's store (gap + grace) hides the open [28,28] and overwrites it."""
    records: list[Record] = [("A", "x", 28), ("B", "y", 29), ("A", "z", 28)]
    kafka = KafkaSessionAggregate(1, 0, _init, _add, _merge, session_retention(1, 0, kafka=True))
    for record in records:
        kafka.process(*record)
    updates, _ = _through_driver(SessionWindows.of_inactivity_gap_and_grace(1, 0), records)
    assert kafka.updates[-1] == ("A", 28, 28, "0+z", 28)  # the first record is lost
    assert updates[-1] == ("A", 28, 28, "0|0+x+z", 28)  # merged with [28,28]
    assert updates[:-1] == kafka.updates[:-1]
