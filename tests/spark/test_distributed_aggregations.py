"""Aggregations in the DistributedRunner's batched processor: the driver's records and drops.

Aggregations without windows, sliding windows (Spark has no window starting at each record),
and time or session windows emitting every update, rate-limited, or whose final results go
through a bounded buffer run in :mod:`topology.spark._aggregations`. The Spark tests read a
few small Parquet files (one micro-batch each); once drained the sinks must hold the
driver's records (compared as multisets). The bucket tests run the runner's stages in this
process (:mod:`tests.spark.harness`: its pre stage and batched processors, called as Spark
calls them), micro-batch by micro-batch, and compare records and drop counts with the
driver's, out-of-order input included.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, BufferFullError, Suppressed
from suppress.entry import RecordContext
from topology import (
    Consumed,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from topology.spark import DistributedRunner, sinks
from topology.spark._aggregations import AggregationBucket, buckets
from topology.spark._compile import compile_topology
from topology.spark._stages import time_and_state
from topology.state.codec import decode

from .harness import Handle, MapState, chunk_table, distributed_run
from .helpers import Row, batches, driver_run, kafka_table
from .test_distributed import as_multiset, driver_records, stream_of, write_parquet

S = Serdes.string()
D, GRACE = 40, 15
UNBOUNDED = BufferConfig.unbounded()


def _windows(windows: str) -> Any:
    """The windows named (``"none"``: no windows); an unknown name raises ``KeyError``."""
    return {
        "none": lambda: None,
        "sliding": lambda: SlidingWindows.of_time_difference_and_grace(D, GRACE),
        "tumbling": lambda: TimeWindows.of_size_and_grace(D, GRACE),
        "hopping": lambda: TimeWindows.of_size_and_grace(D, GRACE).advance_by(D // 4),
        "session": lambda: SessionWindows.of_inactivity_gap_and_grace(D // 2, GRACE),
    }[windows]()


def windowed_clicks(kind: str, windows: str = "sliding", buffer: Any = UNBOUNDED,
                    suppressed: Any = "final") -> Topology:
    """Clicks per user in windows of 40 ms (sessions: a gap of 20 ms; grace 15; ``"none"``:
    without windows), final results only through ``buffer``, or ``suppressed`` (a
    ``Suppressed``, or ``None``: every update)."""
    b = StreamsBuilder()
    grouped: Any = (b.stream("clicks", Consumed(key_serde=S, value_serde=S)).group_by_key())
    if windows != "none":
        grouped = grouped.windowed_by(_windows(windows))
    if kind == "count":
        table = grouped.count()
    elif kind == "reduce":  # time and session windows hand null values to the user's code
        table = grouped.reduce(lambda pages, page: pages + "," + str(page))
    elif windows == "session":  # the result depends on arrival order
        table = grouped.aggregate(lambda: "", lambda user, page, pages: pages + str(page)[-1],
                                  lambda user, a, b: a + b)
    else:
        table = grouped.aggregate(lambda: "", lambda user, page, pages: pages + str(page)[-1])
    if suppressed == "final":
        suppressed = Suppressed.until_window_closes(buffer)
    stream = (table if suppressed is None else table.suppress(suppressed)).to_stream()
    if kind == "reduce" and windows != "none":
        stream = stream.map(lambda w, pages: (w.key, (w.window.start, pages)))
    stream.to("out")
    return b.build()


def sliding_clicks(kind: str) -> Topology:
    """Clicks per user in sliding windows of 40 ms (grace 15), final results only."""
    return windowed_clicks(kind)


def click_rows(seed: int, n: int = 240) -> list[Row]:
    """Clicks of 5 users in timestamp order, and one of a sixth user whose only window the
    last clicks close (so it leaves with the last micro-batch, on its partition's time)."""
    rng = random.Random(seed)
    users = [f"user-{i}" for i in range(5)]
    rows = [("clicks", rng.choice(users).encode(), rng.choice(["/a", "/b", "/c"]).encode(),
             ts) for ts in sorted(rng.randrange(1_500) for _ in range(n))]
    end = rows[-1][3] + 1  # the last click, alone at its time: the time user-9's window closes
    rows += [("clicks", b"user-9", b"/z", end - GRACE - 1), ("clicks", b"user-0", b"/a", end)]
    return sorted(rows, key=lambda r: r[3])


def run(spark: Any, tmp_path: Path, kind: str | Topology, parts: list[list[Row]]
        ) -> tuple[list[Any], DistributedRunner]:
    write_parquet(tmp_path / "in", [kafka_table(part) for part in parts])
    out = sinks.memory()
    topology = sliding_clicks(kind) if isinstance(kind, str) else kind
    runner = DistributedRunner(topology,
                               sources={"clicks": stream_of(spark, tmp_path / "in")},
                               sinks={"out": out}, checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    return out.read_records_to_list(), runner


# -- on Spark ----------------------------------------------------------------------------------

# On Spark: a late record's drop reaching the runner's metrics, and bounded buffers (their
# records and a full buffer failing the query). Every kind, window and suppression, out of
# order and over several partitions, runs through the runner's stages in this process
# (harness properties here and in test_partition_time.py, which also has the end-to-end
# Spark runs of final results and time limits).
def test_a_record_late_beyond_grace_is_dropped_as_by_the_driver(rocksdb_state: Any,
                                                                tmp_path: Path) -> None:
    """Late behind the first micro-batch, in the third: the aggregation drops it (Spark's
    own late-input filter, a micro-batch behind, would have: it drops nothing here)."""
    data = click_rows(seed=3)
    first, second, third = data[:100], data[100:200], data[200:]
    late = ("clicks", b"user-1", b"/late", first[-1][3] - D - GRACE - 2)
    got, runner = run(rocksdb_state, tmp_path, "aggregate",
                      [first, second, [third[0], late, *third[1:]]])
    rows = [*first, *second, third[0], late, *third[1:]]
    expected = driver_records(sliding_clicks("aggregate"), rows, "out")
    assert expected == driver_records(sliding_clicks("aggregate"), data, "out")
    assert as_multiset(got) == as_multiset(expected)
    dropped_by_spark = [op["numRowsDroppedByWatermark"] for p in runner.query.recentProgress
                        for op in p["stateOperators"]]
    assert dropped_by_spark and not any(dropped_by_spark)
    metrics = runner.metrics()  # the processor's drop, as the driver counts it
    assert metrics["dropped-records-total"] == 1.0
    assert metrics["dropped-records-total{reason=expired-window}"] == 1.0


# -- the batched processor's work, as Spark calls it ------------------------------------------

def bucket_run(topology: Topology, parts: list[list[Row]]) -> tuple[list[Any], Counter[str]]:
    """Records and drops of the batched processors, run in this process as Spark calls them
    (:mod:`tests.spark.harness`): each part one micro-batch of input partition 0."""
    got, drops = distributed_run(topology, [[chunk_table(part, 0)] for part in parts])
    return [(key, value, ts) for _, key, value, ts in got], drops


@st.composite
def micro_batches(draw: st.DrawFn) -> list[list[Row]]:
    """Clicks moving forward with jitter (some late beyond grace), null keys and values.

    A record with a null key or value is sometimes far ahead of the others: the aggregation
    drops it before it moves its stream time, in the driver and on the runner alike.
    """
    n = draw(st.integers(1, 60))
    rows: list[Row] = []
    now = 0
    for _ in range(n):
        now += draw(st.integers(0, 15))
        ts = max(0, now - draw(st.sampled_from([0, 0, 0, 5, 30, 120])))
        key = draw(st.sampled_from([b"a", b"b", b"c", b"d", None]))
        value = draw(st.sampled_from([b"/x", b"/y", b"/z", None]))
        if key is None or value is None:
            ts += draw(st.sampled_from([0, 500]))
        rows.append(("clicks", key, value, ts))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    return [rows[i:j] for i, j in zip([0, *cuts], [*cuts, n], strict=True)]


@settings(max_examples=examples(60), deadline=None)
@given(parts=micro_batches(), kind=st.sampled_from(["count", "aggregate", "reduce"]))
def test_buckets_give_the_driver_records_and_drops(parts: list[list[Row]], kind: str) -> None:
    """One input partition per micro-batch: the runner's stream time is the driver's before
    every record, so records and drops agree, out of order too."""
    got, dropped = bucket_run(sliding_clicks(kind), parts)
    expected, expected_drops = driver_run(sliding_clicks(kind), [r for p in parts for r in p])
    assert Counter(got) == Counter(expected)
    assert dropped == expected_drops


def test_a_late_record_is_counted_once_as_by_the_driver() -> None:
    early = [("clicks", b"a", b"/x", ts) for ts in (0, 10, 200)]
    late = [("clicks", b"a", b"/late", 100), ("clicks", b"b", b"/y", 210)]
    got, dropped = bucket_run(sliding_clicks("count"), [early, late])
    expected, expected_drops = driver_run(sliding_clicks("count"), early + late)
    assert expected_drops == Counter({"expired-window": 1})
    assert dropped == expected_drops
    assert Counter(got) == Counter(expected)


# -- bounded buffers: one bucket, the bound the whole buffer's as in a task --------------------

BOUNDS = {
    "records-2": BufferConfig.max_records(2).shut_down_when_full(),
    "records-6": BufferConfig.max_records(6).shut_down_when_full(),
    "bytes-400": BufferConfig.max_bytes(400).shut_down_when_full(),
    "records-5-bytes-600": BufferConfig.max_records(5).with_max_bytes(600)
    .shut_down_when_full(),
}
"""Final results take strict buffers only: a bound that is reached stops the task."""


def outcome(run: Any) -> tuple[str, Any]:
    """``("ok", (records, drops))``, or ``("full", message)`` for a full buffer."""
    try:
        return "ok", run()
    except BufferFullError as full:
        return "full", str(full)
    except Exception as error:  # the driver wraps what a processor raises
        cause = error.__cause__
        if isinstance(cause, BufferFullError):
            return "full", str(cause)
        raise


@settings(max_examples=examples(80), deadline=None)
@given(parts=micro_batches(), kind=st.sampled_from(["count", "aggregate", "reduce"]),
       windows=st.sampled_from(["tumbling", "hopping", "session", "sliding"]),
       bound=st.sampled_from(sorted(BOUNDS)))
def test_bounded_buffers_give_the_driver_records_or_its_error(
        parts: list[list[Row]], kind: str, windows: str, bound: str) -> None:
    """Within the bound the driver's records and drops; over it, the driver's error."""
    topology = windowed_clicks(kind, windows, BOUNDS[bound])
    spec = compile_topology(topology).batched
    assert spec is not None and buckets(spec) == 1
    got = outcome(lambda: bucket_run(topology, parts))
    expected = outcome(lambda: driver_run(windowed_clicks(kind, windows, BOUNDS[bound]),
                                          [r for p in parts for r in p]))
    if got[0] == "ok" and expected[0] == "ok":
        assert Counter(got[1][0]) == Counter(expected[1][0])
        assert got[1][1] == expected[1][1]
    else:
        assert got == expected


def test_a_full_buffer_stops_the_bucket_as_it_stops_the_driver() -> None:
    """Three users' sessions open at once in a buffer of two."""
    rows = [("clicks", f"u{i}".encode(), b"/a", i) for i in range(3)]
    got = outcome(lambda: bucket_run(windowed_clicks("count", "session", BOUNDS["records-2"]),
                                     [rows[:1], rows[1:]]))
    expected = outcome(lambda: driver_run(
        windowed_clicks("count", "session", BOUNDS["records-2"]), rows))
    assert expected[0] == "full"
    assert got == expected


def test_a_bounded_buffer_on_spark_gives_the_driver_records(rocksdb_state: Any,
                                                            tmp_path: Path) -> None:
    """A bound the clicks never reach, compiled to one bucket: the driver's final results
    (that the bound holds on Spark: test_a_full_buffer_fails_the_query)."""
    windows = "session"
    data = click_rows(seed=11)
    bound = BufferConfig.max_records(50).shut_down_when_full()
    spec = compile_topology(windowed_clicks("aggregate", windows, bound)).batched
    assert spec is not None and buckets(spec) == 1
    got, runner = run(rocksdb_state, tmp_path, windowed_clicks("aggregate", windows, bound),
                      [list(p) for p in batches(data, 3)])
    expected = driver_records(windowed_clicks("aggregate", windows, bound), data, "out")
    assert len(expected) > 20
    assert as_multiset(got) == as_multiset(expected)
    assert runner.metrics()["records-out-total"] == len(expected)


def test_a_full_buffer_fails_the_query(rocksdb_state: Any, tmp_path: Path) -> None:
    """Five users' windows open at once in a buffer of two: Spark's query fails with the
    buffer's error, as the driver's task stops."""
    with pytest.raises(Exception, match="buffer exceeded its max capacity"):
        run(rocksdb_state, tmp_path, windowed_clicks("count", "tumbling", BOUNDS["records-2"]),
            [click_rows(seed=5)])


# -- every update, or rate-limited: with or without windows -------------------------------------

SUPPRESSIONS = {
    "every-update": None,
    "limit-30": Suppressed.until_time_limit(30, UNBOUNDED),
    "limit-30-records-2": Suppressed.until_time_limit(
        30, BufferConfig.max_records(2).emit_early_when_full()),
}


@settings(max_examples=examples(80), deadline=None)
@given(parts=micro_batches(), kind=st.sampled_from(["count", "aggregate", "reduce"]),
       windows=st.sampled_from(["none", "tumbling", "hopping", "session", "sliding"]),
       suppression=st.sampled_from(sorted(SUPPRESSIONS)))
def test_updates_and_time_limits_give_the_driver_records_and_drops(
        parts: list[list[Row]], kind: str, windows: str, suppression: str) -> None:
    """Every update, or updates rate-limited (a bounded buffer emitting keys early in one
    bucket), with or without windows: the driver's records and drops."""
    def topology() -> Topology:
        return windowed_clicks(kind, windows, suppressed=SUPPRESSIONS[suppression])

    got, dropped = bucket_run(topology(), parts)
    expected, expected_drops = driver_run(topology(), [r for p in parts for r in p])
    assert Counter(got) == Counter(expected)
    assert dropped == expected_drops


def test_a_rate_limited_count_leaves_when_the_time_passes_its_limit() -> None:
    """A key's update leaves once the time limit passed: here a's, when c's record moves
    the time past it; c's own stays buffered (no later record: neither driver nor runner
    emits it)."""
    rows = [("clicks", b"a", b"/x", 0), ("clicks", b"a", b"/y", 5), ("clicks", b"c", b"/x", 50)]
    limited = Suppressed.until_time_limit(30, UNBOUNDED)
    got, _ = bucket_run(windowed_clicks("count", "none", suppressed=limited), [rows[:2], rows[2:]])
    expected, _ = driver_run(windowed_clicks("count", "none", suppressed=limited), rows)
    assert expected == [("a", 2, 5)]
    assert got == expected


def test_running_totals_are_a_row_of_state_per_key() -> None:
    """Without windows each key's aggregate is a map state entry of its own, not in the
    group's value; a call reads and writes only the keys its records name, and a record
    that leaves an aggregate as it was writes nothing."""
    plan = compile_topology(windowed_clicks("count", "none", suppressed=None))
    spec = plan.batched
    assert spec is not None
    rows = MapState()
    bucket = AggregationBucket(spec, plan.post, None, rows)
    for key, ts in (("a", 5), ("b", 6), ("a", 9)):
        bucket.advance(ts)
        bucket.process(key, "/x", RecordContext(ts, -1, "clicks", 0, ()))
    assert [(k, v, ts) for _, k, v, ts, _ in bucket.take()] == [
        ("a", 1, 5), ("b", 1, 6), ("a", 2, 9)]
    state = bucket.state()
    assert time_and_state(state, spec.name) == (9, None)
    assert {k: decode(v) for (k,), (v,) in rows.entries.items()} == {
        b"a": ("a", 2, 9), b"b": ("b", 1, 6)}
    assert rows.writes == 2
    again = AggregationBucket(spec, plan.post, state, rows)
    again.process("c", "/y", RecordContext(10, -1, "clicks", 0, ()))
    again.state()
    assert rows.writes == 3  # c's row only
    assert decode(rows.entries[(b"c",)][0]) == ("c", 1, 10)


@pytest.mark.parametrize("windows", ["tumbling", "hopping", "session", "sliding"])
def test_windowed_aggregations_keep_no_rows_per_key(windows: str) -> None:
    """Windows expire: they stay in the group's value, beside the buffer; no map state."""
    from topology.spark._aggregations import BatchedAggregationProcessor

    plan = compile_topology(windowed_clicks("count", windows))
    assert plan.batched is not None
    states: dict[str, Any] = {}
    BatchedAggregationProcessor(plan.batched, plan.post).init(Handle(states))
    assert list(states) == ["windows"]


def test_a_row_that_did_not_change_is_not_written() -> None:
    """A reduce to the larger value: a smaller record, not later, leaves the row as it was."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S)).group_by_key()
     .reduce(max).to_stream().to("out"))
    plan = compile_topology(b.build())
    spec = plan.batched
    assert spec is not None
    rows = MapState()
    bucket = AggregationBucket(spec, plan.post, None, rows)
    bucket.process("a", "/z", RecordContext(5, -1, "clicks", 0, ()))
    bucket.state()
    again = AggregationBucket(spec, plan.post, None, rows)
    again.process("a", "/a", RecordContext(5, -1, "clicks", 0, ()))
    again.state()
    assert rows.writes == 1
