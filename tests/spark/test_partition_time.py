"""Kafka's task model on the DistributedRunner: a stream time per input partition.

Out-of-order input spread over several input partitions, handed over in micro-batches whose
chunks (Spark partitions) come in any order, one partition's records possibly split over two
chunks: the runner's batched stages (run in this process by :mod:`tests.spark.harness`, the
runner's own code) must give what one test driver per input partition gives, final results,
time limits and drops alike.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from topology import Consumed, Materialized, Serdes, StreamsBuilder, Topology
from topology.errors import IllegalStateError
from topology.runtime.engine import merge_by_timestamp
from topology.spark import DistributedRunner, sinks
from topology.spark._aggregations import AggregationBucket
from topology.spark._compile import compile_topology
from topology.spark._join import buckets as join_buckets
from topology.spark._stages import FRAME, timed_state
from topology.spark._time_limit import TimeLimitProcessor
from topology.spark.columns import plan as column_plan
from topology.spark.distributed import plan_stage
from topology.state.codec import encode
from topology.windows import Window, Windowed

from .harness import KAFKA_SCHEMA, Handle, MapState, ValueState, chunk_table, distributed_run
from .helpers import Row, batches, driver_run, state_rows, task_order
from .test_distributed import (
    converted_payments as regrouped_conversions,
)
from .test_distributed import (
    rate_limited_levels,
    stream_of,
    write_parquet,
)
from .test_distributed_aggregations import SUPPRESSIONS, _windows, outcome, windowed_clicks
from .test_distributed_sources import merged_counts
from .test_distributed_table_aggregations import balances

LEVEL = Serdes.long().serialize
Piece = tuple[int, list[Row]]
"""One chunk's records: its input partition, its rows in their order."""


@st.composite
def partitioned(draw: st.DrawFn, topic: str = "clicks",
                values: tuple[bytes | None, ...] = (b"/x", b"/y", b"/z", None)
                ) -> list[list[Piece]]:
    """Micro-batches of 1-3 input partitions, each moving forward with its own jitter.

    Each micro-batch holds a slice of every partition (possibly empty), as one chunk or
    two, the chunks in any order but a partition's own in its order. Null keys and values
    at any time: a step that drops them does not move its partition's time with them.
    """
    n_partitions = draw(st.integers(1, 3))
    streams: list[list[Row]] = []
    for _ in range(n_partitions):
        rows: list[Row] = []
        now = draw(st.integers(0, 200))
        for _ in range(draw(st.integers(0, 30))):
            now += draw(st.integers(0, 15))
            ts = max(0, now - draw(st.sampled_from([0, 0, 0, 5, 30, 120])))
            key = draw(st.sampled_from([b"a", b"b", b"c", b"d", None]))
            value = draw(st.sampled_from(values))
            if key is None or value is None:  # sometimes far ahead of its partition
                ts += draw(st.sampled_from([0, 500]))
            rows.append((topic, key, value, ts))
        streams.append(rows)
    n_batches = draw(st.integers(1, 4))
    cuts = [sorted(draw(st.lists(st.integers(0, len(rows)), min_size=n_batches - 1,
                                 max_size=n_batches - 1))) for rows in streams]
    out: list[list[Piece]] = []
    for b in range(n_batches):
        pieces: list[list[Piece]] = []
        for p, rows in enumerate(streams):
            bounds = [0, *cuts[p], len(rows)]
            part = rows[bounds[b]:bounds[b + 1]]
            split = draw(st.integers(0, len(part)))
            pieces.append([(p, part[:split]), (p, part[split:])] if draw(st.booleans())
                          else [(p, part)])
        out.append(_interleaved(draw, pieces))
    return out


def _interleaved(draw: st.DrawFn, sequences: list[list[Piece]]) -> list[Piece]:
    """The pieces of every sequence, each sequence's in its order, interleaved any way."""
    order = draw(st.permutations([i for i, pieces in enumerate(sequences) for _ in pieces]))
    taken = [0] * len(sequences)
    batch: list[Piece] = []
    for i in order:
        batch.append(sequences[i][taken[i]])
        taken[i] += 1
    return batch


def per_partition_drivers(make: Any, batches: list[list[Piece]], topic: str
                          ) -> tuple[Counter[Any], Counter[str]]:
    """What one driver per input partition gives, records and drops summed."""
    rows: dict[int, list[Row]] = {}
    for batch in batches:
        for p, part in batch:
            rows.setdefault(p, []).extend(part)
    records: Counter[Any] = Counter()
    drops: Counter[str] = Counter()
    for mine in rows.values():
        got, dropped = driver_run(make(), mine, topic)
        records.update(got)
        drops.update(dropped)
    return records, drops


def runner_output(make: Any, batches: list[list[Piece]], topic: str, seed: int
                  ) -> tuple[Counter[Any], Counter[str]]:
    got, dropped = distributed_run(
        make(), [[chunk_table(part, p) for p, part in batch] for batch in batches], seed)
    return Counter((k, v, ts) for t, k, v, ts in got if t == topic), dropped


AGGREGATIONS = {
    "sliding-final": lambda kind: windowed_clicks(kind, "sliding"),
    "tumbling-bounded": lambda kind: windowed_clicks(
        kind, "tumbling", BufferConfig.max_records(50).shut_down_when_full()),
    "session-limit": lambda kind: windowed_clicks(kind, "session",
                                                  suppressed=SUPPRESSIONS["limit-30"]),
    "hopping-updates": lambda kind: windowed_clicks(kind, "hopping", suppressed=None),
    "totals-limit": lambda kind: windowed_clicks(kind, "none",
                                                 suppressed=SUPPRESSIONS["limit-30"]),
}


@settings(max_examples=examples(60), deadline=None)
@given(batches=partitioned(), case=st.sampled_from(sorted(AGGREGATIONS)),
       kind=st.sampled_from(["count", "aggregate"]), seed=st.integers(0, 3))
def test_aggregations_give_one_driver_per_partition(batches: list[list[Piece]], case: str,
                                                    kind: str, seed: int) -> None:
    def make() -> Topology:
        return AGGREGATIONS[case](kind)

    assert runner_output(make, batches, "out", seed) == \
        per_partition_drivers(make, batches, "out")


LIMIT_BUFFERS = {
    "unbounded": None,
    "records-3-early": BufferConfig.max_records(3).emit_early_when_full(),
    "bytes-120-early": BufferConfig.max_bytes(120).emit_early_when_full(),
    "records-4-bytes-150-early": BufferConfig.max_records(4).with_max_bytes(150)
    .emit_early_when_full(),
    "records-2-spill": BufferConfig.max_records(2).spill_to_disk_when_full(),
}
"""A time limit's buffers: the bound is the partition's whole buffer, as a task's is; a
byte bound counts each change's old value, the key's previous one in the table."""


@settings(max_examples=examples(60), deadline=None)
@given(batches=partitioned("levels", (LEVEL(3), LEVEL(-7), None)), seed=st.integers(0, 3),
       buffer=st.sampled_from(sorted(LIMIT_BUFFERS)))
def test_time_limits_give_one_driver_per_partition(batches: list[list[Piece]], seed: int,
                                                   buffer: str) -> None:
    def make() -> Topology:
        return rate_limited_levels(LIMIT_BUFFERS[buffer])

    assert runner_output(make, batches, "levels-limited", seed) == \
        per_partition_drivers(make, batches, "levels-limited")


def test_a_bound_emits_keys_early_as_the_driver() -> None:
    """max_records(3), emit early: the bound is the whole buffer's, over every key group."""
    levels = [("levels", f"s{i % 7}".encode(), LEVEL(i), 10 * i) for i in range(40)]
    batches = [[(0, levels[:20])], [(0, levels[20:])]]

    def make() -> Topology:
        return rate_limited_levels(LIMIT_BUFFERS["records-3-early"])

    expected = per_partition_drivers(make, batches, "levels-limited")
    unbounded, _ = per_partition_drivers(rate_limited_levels, batches, "levels-limited")
    assert expected[0].total() > unbounded.total()  # the bound emitted keys early
    assert runner_output(make, batches, "levels-limited", 0) == expected


def test_a_byte_bound_counts_each_keys_previous_table_value() -> None:
    """a updated twice, then two deletes: the second update's old value (a's first) takes
    the buffer over 120 bytes, so a leaves early, in the driver and the runner alike; the
    table's rows are kept, a row per key, only under a byte bound."""
    levels = [("levels", b"a", LEVEL(3), 0), ("levels", b"a", LEVEL(3), 0),
              ("levels", b"b", None, 0), ("levels", b"c", None, 0)]
    batches = [[(0, levels[:1])], [(0, levels[1:])]]
    kept: dict[str, Any] = {}
    for name in ("bytes-120-early", "records-3-early"):
        plan = compile_topology(rate_limited_levels(LIMIT_BUFFERS[name]))
        assert plan.limit is not None
        states: dict[str, Any] = {}
        processor = TimeLimitProcessor(plan.limit, plan.post)
        processor.init(Handle(states))
        kept[name] = states

    def make() -> Topology:
        return rate_limited_levels(LIMIT_BUFFERS["bytes-120-early"])

    expected = per_partition_drivers(make, batches, "levels-limited")
    assert expected == (Counter({("a", 30, 0): 1}), Counter())
    assert runner_output(make, batches, "levels-limited", 0) == expected
    assert sorted(kept["bytes-120-early"]) == ["buffer", "table"]
    assert sorted(kept["records-3-early"]) == ["buffer"]


def rate_limited_ints(config: Any) -> Topology:
    """A table of 4-byte ints (whose bytes are not the fallback's), time-limited to 50 ms."""
    b = StreamsBuilder()
    (b.table("levels", Consumed(key_serde=Serdes.string(), value_serde=Serdes.integer()))
     .suppress(Suppressed.until_time_limit(50, config))
     .to_stream()
     .to("levels-limited"))
    return b.build()


INT = Serdes.integer().serialize


@settings(max_examples=examples(40), deadline=None)
@given(batches=partitioned("levels", (INT(3), INT(-7), None)), seed=st.integers(0, 3),
       bound=st.sampled_from([60, 90, 120, 200]))
def test_a_byte_bound_sizes_values_with_the_tables_serde(batches: list[list[Piece]],
                                                        seed: int, bound: int) -> None:
    def make() -> Topology:
        return rate_limited_ints(BufferConfig.max_bytes(bound).emit_early_when_full())

    assert runner_output(make, batches, "levels-limited", seed) == \
        per_partition_drivers(make, batches, "levels-limited")


def test_a_buffer_written_before_old_values_were_kept_is_read() -> None:
    """Its entries had no old value (the runner knew none): each is read back with its prior
    as its old value."""
    plan = compile_topology(rate_limited_levels(LIMIT_BUFFERS["bytes-120-early"]))
    assert plan.limit is not None
    buffer = ValueState()
    buffer.update((timed_state(12, [(10, "a", 3, None, (10, -1, "levels", 0, ()))]),))
    processor = TimeLimitProcessor(plan.limit, plan.post)
    processor.init(Handle({"buffer": buffer}))
    engine, _ = processor._restore()
    assert engine.stream_time == 12
    assert [(e.time, e.key, e.new, e.old, e.prior, tuple(e.context)) for e in engine.buffer] \
        == [(10, "a", 3, None, None, (10, -1, "levels", 0, ()))]


def test_a_full_time_limit_buffer_that_shuts_down_stops_as_the_driver() -> None:
    levels = [("levels", f"s{i % 7}".encode(), LEVEL(i), 10 * i) for i in range(12)]

    def make() -> Topology:
        return rate_limited_levels(BufferConfig.max_records(3).shut_down_when_full())

    got = outcome(lambda: runner_output(make, [[(0, levels)]], "levels-limited", 0))
    expected = outcome(lambda: driver_run(make(), levels, "levels-limited"))
    assert expected[0] == "full"
    assert got == expected


def test_a_partition_behind_another_is_not_late() -> None:
    """Partition 1 lags partition 0 by far: its records are on time in its own task."""
    ahead = [("clicks", b"a", b"/x", 100_000)]
    behind = [("clicks", b"b", b"/y", 5), ("clicks", b"b", b"/y", 12)]
    later = [("clicks", b"b", b"/y", 15), ("clicks", b"b", b"/y", 1_000)]
    batches = [[(0, ahead)], [(1, behind)], [(1, later)]]

    def make() -> Topology:
        return AGGREGATIONS["tumbling-bounded"]("count")

    got, drops = runner_output(make, batches, "out", 0)
    assert (got, drops) == per_partition_drivers(make, batches, "out")
    assert drops == Counter()
    assert got[(Windowed("b", Window(0, 40)), 3, 15)] == 1  # closed by its partition alone


def test_a_group_without_records_in_a_batch_still_emits() -> None:
    """Key a's window closes on partition 0's time, carried by key b's records only."""
    first = [("clicks", b"a", b"/x", 1)]
    second = [("clicks", b"b", b"/x", t) for t in (100, 200, 300)]
    batches = [[(0, first)], [(0, second)]]

    def make() -> Topology:
        return AGGREGATIONS["tumbling-bounded"]("count")

    got, _ = runner_output(make, batches, "out", 0)
    assert got == per_partition_drivers(make, batches, "out")[0]
    assert got[(Windowed("a", Window(0, 40)), 1, 1)] == 1


def test_state_of_an_earlier_release_is_refused() -> None:
    plan = compile_topology(windowed_clicks("count", "none", suppressed=None))
    assert plan.batched is not None
    unmarked = encode(({b"a": encode(("a", 2, 5))}, []))  # every partition's keys together
    in_value = encode(("per-partition-1", 5, ({b"a": encode(("a", 2, 5))}, [])))
    for legacy in (unmarked, in_value):  # the second: aggregates in the group's value
        with pytest.raises(IllegalStateError, match="new checkpoint_dir"):
            AggregationBucket(plan.batched, plan.post, legacy, MapState())


def test_a_partition_split_over_two_chunks_keeps_its_order() -> None:
    """The second chunk's record is late after the first chunk's, of another key group."""
    batches = [[(0, [("clicks", b"a", b"/x", 100)]), (0, [("clicks", b"b", b"/y", 5)])]]

    def make() -> Topology:
        return AGGREGATIONS["hopping-updates"]("count")

    got, drops = runner_output(make, batches, "out", 0)
    assert drops == Counter({"expired-window": 1})
    assert (got, drops) == per_partition_drivers(make, batches, "out")


@pytest.mark.parametrize("seed", [4, 5])
def test_topics_in_chunks_of_their_own_read_side_by_side(seed: int) -> None:
    """Clicks and taps of one partition, each topic a chunk of its own (as Spark's Kafka
    source gives them), in timestamp order: what a task merging them lowest timestamp first
    gives, though each chunk is read on its own."""
    from .test_distributed_sources import click_and_tap_rows, merged_counts

    data = click_and_tap_rows(seed)
    parts = [list(part) for part in batches(data, 3)]
    micro_batches = [[chunk_table([r for r in part if r[0] == topic], 0)
                      for topic in ("taps", "clicks")] for part in parts]
    got, drops = distributed_run(merged_counts(), micro_batches)
    expected, expected_drops = driver_run(merged_counts(), task_order(data, 3), "counts")
    assert Counter((k, v, ts) for t, k, v, ts in got if t == "counts") == Counter(expected)
    assert drops == expected_drops


# -- on Spark: one end-to-end run per kind of batched step ------------------------------------

def spark_run(spark: Any, tmp_path: Path, make: Any, batches: list[list[Piece]], topic: str
              ) -> tuple[Counter[Any], Counter[str]]:
    """The runner on Spark, one Parquet file per micro-batch (its partitions' rows mixed):
    its records, and its drops by reason from its metrics."""
    write_parquet(tmp_path / "in", [pa.concat_tables([chunk_table(part, p) for p, part in batch])
                                    for batch in batches])
    out = sinks.memory()
    source = "levels" if topic == "levels-limited" else "clicks"
    runner = DistributedRunner(make(), sources={source: stream_of(spark, tmp_path / "in")},
                               sinks={topic: out}, checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    prefix = "dropped-records-total{reason="
    drops = Counter({name[len(prefix):-1]: int(n) for name, n in runner.metrics().items()
                     if name.startswith(prefix) and n})
    return Counter((r.key, r.value, r.timestamp) for r in out.read_records_to_list()), drops


def lagging_partitions(topic: str, value: Any, seed: int) -> list[list[Piece]]:
    """Three partitions, the second far behind the others, each out of order."""
    rng = random.Random(seed)
    streams = []
    for start in (5_000, 0, 4_000):
        rows = [(topic, rng.choice([b"a", b"b", b"c"]), value(rng),
                 max(0, start + 10 * i - rng.choice([0, 0, 30, 200]))) for i in range(60)]
        streams.append(rows)
    return [[(p, rows[i * 20:(i + 1) * 20]) for p, rows in enumerate(streams)]
            for i in range(3)]


def test_final_results_on_spark_give_one_driver_per_partition(rocksdb_state: Any,
                                                              tmp_path: Path) -> None:
    batches = lagging_partitions("clicks", lambda rng: rng.choice([b"/x", b"/y"]), 1)

    def make() -> Topology:
        return windowed_clicks("count", "tumbling")

    expected, drops = per_partition_drivers(make, batches, "out")
    assert len(expected) > 20 and drops  # late within a partition, none across them
    assert spark_run(rocksdb_state, tmp_path, make, batches, "out") == (expected, drops)


def test_time_limits_on_spark_give_one_driver_per_partition(rocksdb_state: Any,
                                                            tmp_path: Path) -> None:
    """A buffer of 150 bytes emitting early, each partition's its own; tombstones among the
    levels, a null key (dropped and counted), and in the last micro-batch two records of the
    lagging partition behind its own time and every other's: not dropped, emitted as one
    driver per partition emits them. The table's rows are Spark's state, a row per key and
    partition that still has a value."""
    batches = lagging_partitions(
        "levels", lambda rng: None if rng.random() < 0.1 else LEVEL(rng.randrange(9)), 2)
    batches[0][0][1].insert(10, ("levels", None, LEVEL(7), batches[0][0][1][10][3]))
    batches[2][1][1][:0] = [("levels", b"d", LEVEL(1), 3), ("levels", b"e", LEVEL(2), 5)]

    def make() -> Topology:
        return rate_limited_levels(BufferConfig.max_bytes(150).emit_early_when_full())

    expected, drops = per_partition_drivers(make, batches, "levels-limited")
    unbounded, _ = per_partition_drivers(rate_limited_levels, batches, "levels-limited")
    assert expected.total() > unbounded.total()  # the bound emitted keys early
    assert any(value is None for _, value, _ in expected)
    assert {(key, ts) for key, _, ts in expected} >= {("d", 3), ("e", 5)}
    assert drops == Counter({"null-key": 1})
    assert spark_run(rocksdb_state, tmp_path, make, batches, "levels-limited") == \
        (expected, drops)
    latest: dict[tuple[int, bytes], bytes | None] = {}
    for batch in batches:
        for p, part in batch:
            latest.update(((p, key), value) for _, key, value, _ in part if key is not None)
    assert sorted(state_rows(rocksdb_state, tmp_path / "chk", 0, "table")) == sorted(
        key for (_, key), value in latest.items() if value is not None)


# -- several topics of one partition, and a table aggregation's re-key -------------------------

@st.composite
def two_topics(draw: st.DrawFn) -> list[Row]:
    """Clicks and taps of one partition, each topic's timestamps in any order."""
    rows: list[Row] = []
    for topic, value in (("clicks", b"/x"), ("taps", b'{"page": "/t"}')):
        for _ in range(draw(st.integers(1 if topic == "clicks" else 0, 8))):
            rows.append((topic, draw(st.sampled_from([b"a", b"b", b"c"])), value,
                         draw(st.integers(0, 1_000))))
    return rows


@settings(max_examples=examples(100), deadline=None)
@given(rows=two_topics(), one_chunk=st.booleans())
def test_topics_of_a_partition_merge_lowest_timestamp_first(rows: list[Row],
                                                           one_chunk: bool) -> None:
    """Each topic a chunk of its own (Spark's Kafka source) or one chunk of both: the key
    groups take the records as a task merging the topics by head timestamp does."""
    by_topic = [[r for r in rows if r[0] == topic] for topic in ("clicks", "taps")]
    chunks = [chunk_table(mine, 0) for mine in by_topic if mine]
    if one_chunk and len(chunks) == 2:
        chunks = [pa.concat_tables(chunks)]
    got, drops = distributed_run(merged_counts(False), [chunks] if chunks else [])
    expected, expected_drops = driver_run(merged_counts(False), task_order(rows, 1), "counts")
    assert Counter((k, v, ts) for t, k, v, ts in got if t == "counts") == Counter(expected)
    assert drops == expected_drops


def test_a_record_behind_its_topic_waits_for_the_other_topics_head() -> None:
    """Clicks a@1000, b@1 and a tap b@500 in groups of their own: the task takes the tap
    before a@1000, so only b@1 is late."""
    clicks = [("clicks", b"a", b"/x", 1_000), ("clicks", b"b", b"/x", 1)]
    taps = [("taps", b"b", b'{"page": "/t"}', 500)]
    later = [("clicks", b"c", b"/x", 5_000)]
    got, drops = distributed_run(merged_counts(False), [
        [chunk_table(clicks, 0), chunk_table(taps, 0)], [chunk_table(later, 0)]])
    expected, expected_drops = driver_run(merged_counts(False), [*taps, *clicks, *later],
                                          "counts")
    assert expected_drops == Counter({"expired-window": 1})
    assert (Counter((k, v, ts) for t, k, v, ts in got if t == "counts"), drops) == \
        (Counter(expected), expected_drops)


@st.composite
def account_partitions(draw: st.DrawFn) -> list[list[Row]]:
    """Account rows of two partitions, each account in one, timestamps in any order."""
    out = []
    for keys in ((b"a", b"b"), (b"c", b"d")):
        rows = []
        for _ in range(draw(st.integers(0, 6))):
            key = draw(st.sampled_from(keys))
            region = "east" if key in (b"a", b"c") else "south"
            rows.append(("accounts", key, f"{region}:{draw(st.integers(1, 5))}".encode(),
                         draw(st.integers(0, 200))))
        out.append(rows)
    return out


@settings(max_examples=examples(60), deadline=None)
@given(parts=account_partitions())
def test_a_table_aggregation_runs_as_one_repartition_partition(parts: list[list[Row]]) -> None:
    """Two partitions in one chunk: the re-grouped changes reach the rate-limited
    aggregation as one repartition partition takes them, partition after partition."""
    chunk = pa.concat_tables([chunk_table(rows, p) for p, rows in enumerate(parts)])
    got, _ = distributed_run(balances("reduce", 10), [[chunk]])
    expected, _ = driver_run(balances("reduce", 10), parts[0] + parts[1])
    assert Counter((k, v, ts) for _, k, v, ts in got) == Counter(expected)


def keyed_conversions() -> Topology:
    """Payments keyed by currency joined as of their time with the rates, 100 ms of grace."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=Serdes.string(), value_serde=Serdes.json()),
                    Materialized.versioned("rates", 10_000))
    (b.stream("payments", Consumed(key_serde=Serdes.string(), value_serde=Serdes.json()))
     .join(rates, lambda amount, rate: round(amount * rate, 2), grace=100)
     .to("converted"))
    return b.build()


def test_a_join_with_grace_keeps_a_grace_buffer_per_partition(rocksdb_state: Any,
                                                              tmp_path: Path) -> None:
    """Partition 0's payments are far ahead of partition 1's: each partition's grace buffer
    has its own time, as each task's has."""
    import pyarrow as pa

    def rows(topic: str, key: bytes, start: int, value: Any) -> list[Row]:
        return [(topic, key, json.dumps(value(i)).encode(), start + 40 * i) for i in range(12)]

    streams = {0: (rows("rates", b"EUR", 5_000, lambda i: 1 + i / 10),
                   rows("payments", b"EUR", 5_010, lambda i: 10 * i)),
               1: (rows("rates", b"USD", 0, lambda i: 2 + i / 10),
                   rows("payments", b"USD", 10, lambda i: 10 * i))}
    for topic, index in (("rates", 0), ("payments", 1)):
        write_parquet(tmp_path / topic, [pa.concat_tables(
            [chunk_table(streams[p][index][b * 4:(b + 1) * 4], p) for p in (0, 1)])
            for b in range(3)])
    out = sinks.memory()
    DistributedRunner(keyed_conversions(),
                      sources={t: stream_of(rocksdb_state, tmp_path / t)
                               for t in ("rates", "payments")},
                      sinks={"converted": out},
                      checkpoint_dir=str(tmp_path / "chk")).run_available()
    expected: Counter[Any] = Counter()
    for rates, payments in streams.values():
        got, _ = driver_run(keyed_conversions(), task_order(
            [r for b in range(3) for r in rates[b * 4:(b + 1) * 4] + payments[b * 4:(b + 1) * 4]],
            3), "converted")
        expected.update(got)
    assert len(expected) > 15
    assert Counter((r.key, r.value, r.timestamp) for r in out.read_records_to_list()) == expected


def test_join_state_of_an_earlier_release_is_refused() -> None:
    from topology.spark._join import AsOfJoinProcessor

    plan = compile_topology(keyed_conversions())
    assert plan.join is not None and plan.joined is not None
    processor = AsOfJoinProcessor(plan.join, plan.joined)
    state = ValueState()
    state.update((encode((5, {}, None)),))  # (observed, histories, buffer): no form tag
    processor.init(Handle({"history": state}))
    frame = pa.RecordBatch.from_pylist([], schema=FRAME).to_pandas()
    with pytest.raises(IllegalStateError, match="new checkpoint_dir"):
        list(processor.handleInputRows((0,), iter([frame]), None))


@pytest.mark.parametrize(("make", "partitions"), [(keyed_conversions, [0, 1]),
                                                  (regrouped_conversions, [0])])
def test_records_for_a_join_carry_their_partition(make: Any, partitions: list[int]) -> None:
    """The join's input packs say the task: their key group's input partition, 0 after a
    re-key."""
    plan = compile_topology(make())
    stage = plan_stage(plan, column_plan(None, KAFKA_SCHEMA, plan.sources), plan.sources)
    payment = [("payments", b"EUR", b"10", 5)] if make is keyed_conversions else [
        ("payments", b"p1", b'{"currency": "EUR", "account": "a", "amount": 10}', 5)]
    chunk = pa.concat_tables([chunk_table(payment, p) for p in (0, 1)])
    rows = pa.Table.from_batches(list(stage(
        iter(chunk.select(list(column_plan(None, KAFKA_SCHEMA, plan.sources).selected))
             .to_batches()), partition_id=0)))
    packs = rows.filter(pc.greater(rows.column("st"), 0))  # ticks hold no records
    per_partition = join_buckets(plan.join)
    assert sorted({g // per_partition for g in packs.column("seq").to_pylist()}) == partitions


# -- the as-of join: a task's order over partitions, topics and chunks -------------------------

def converting(left: bool, grace: int | None, retention: int) -> Topology:
    """Payments keyed by currency joined as of their time with the rates (``left``: a left
    join, which joins a payment without a rate, or without a key)."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()),
                    Materialized.versioned("rates", retention))
    payments = b.stream("payments", Consumed(key_serde=Serdes.string(),
                                             value_serde=Serdes.string())).filter(
        lambda currency, amount: amount != "skip")  # read by the task, never joined
    joiner = (lambda amount, rate: f"{amount}x{rate}")  # noqa: E731
    (payments.left_join(rates, joiner, grace=grace) if left
     else payments.join(rates, joiner, grace=grace)).to("converted")
    return b.build()


@st.composite
def rates_and_payments(draw: st.DrawFn) -> tuple[list[list[Piece]], list[list[Row]]]:
    """Micro-batches of rates and payments of 1-2 input partitions, each topic's timestamps
    in any order, and what each partition's task reads in each micro-batch.

    A partition's slice of a micro-batch comes as a chunk per topic (as Spark's Kafka source
    gives it), a topic's sometimes split in two, or as one chunk of both topics; the chunks
    in any order but a topic's own in its order. A task reads each micro-batch's records
    of a partition merged lowest head timestamp first.
    """
    n_partitions = draw(st.integers(1, 2))
    n_batches = draw(st.integers(1, 3))
    slices: list[list[dict[str, list[Row]]]] = []  # per partition, per batch, per topic
    for partition in range(n_partitions):
        mine: list[dict[str, list[Row]]] = [{} for _ in range(n_batches)]
        for topic in ("rates", "payments"):
            rows: list[Row] = []
            now = 0
            for _ in range(draw(st.integers(0, 12))):
                now += draw(st.integers(0, 10))
                ts = max(0, now - draw(st.sampled_from([0, 0, 4, 25])))
                key = draw(st.sampled_from([b"EUR", b"USD", b"JPY", b"CHF", b"GBP", None]))
                if key is not None and partition:  # each partition's keys its own
                    key += b"-%d" % partition
                value = draw(st.sampled_from([b"1.1", b"0.9", None] if topic == "rates"
                                             else [b"10", b"25", b"skip"]))
                rows.append((topic, key, value, ts))
            cuts = sorted(draw(st.lists(st.integers(0, len(rows)), min_size=n_batches - 1,
                                        max_size=n_batches - 1)))
            bounds = [0, *cuts, len(rows)]
            for b in range(n_batches):
                mine[b][topic] = rows[bounds[b]:bounds[b + 1]]
        slices.append(mine)
    batches: list[list[Piece]] = []
    reads: list[list[Row]] = [[] for _ in range(n_partitions)]
    for b in range(n_batches):
        sequences: list[list[Piece]] = []
        for p in range(n_partitions):
            by_topic = slices[p][b]
            reads[p] += [(t, *r) for t, records in merge_by_timestamp(
                {t: [r[1:] for r in rows] for t, rows in by_topic.items() if rows})
                for r in records] if any(by_topic.values()) else []
            if draw(st.booleans()):
                sequences.append([(p, by_topic["rates"] + by_topic["payments"])])
                continue
            for rows in by_topic.values():
                split = draw(st.integers(0, len(rows)))
                sequences.append([(p, rows[:split]), (p, rows[split:])])
        batches.append(_interleaved(draw, sequences))
    return batches, reads


@settings(max_examples=examples(100), deadline=None)
@given(data=rates_and_payments(), left=st.booleans(),
       grace=st.sampled_from([None, 5, 30]), seed=st.integers(0, 3))
def test_joins_give_one_driver_per_partition(data: tuple[list[list[Piece]], list[list[Row]]],
                                             left: bool, grace: int | None, seed: int
                                             ) -> None:
    """Out-of-order rates and payments over partitions and chunks: the joined records and
    the drops of one driver per partition fed what its task reads (history retention
    longer than the input spans, as it is per key group)."""
    batches, reads = data
    got, drops = distributed_run(converting(left, grace, 10_000), [
        [chunk_table(part, p) for p, part in batch] for batch in batches], seed)
    expected: Counter[Any] = Counter()
    expected_drops: Counter[str] = Counter()
    for rows in reads:
        records, dropped = driver_run(converting(left, grace, 10_000), rows, "converted")
        expected.update(records)
        expected_drops.update(dropped)
    assert (Counter((k, v, ts) for t, k, v, ts in got if t == "converted"), drops) == \
        (expected, expected_drops)


def test_a_payment_waits_for_the_rate_its_topic_head_lets_in_first() -> None:
    """Payments p@10, q@2 and the rate @5 in chunks of their own: the task takes the rate
    before the payment @10 (the lower head), so q@2, read after the rate, is joined with
    no rate of its time but the payment @10 is joined with the rate."""
    payments = [("payments", b"EUR", b"10", 10), ("payments", b"EUR", b"25", 2)]
    rate = [("rates", b"EUR", b"1.1", 5)]
    got, _ = distributed_run(converting(True, None, 10_000),
                             [[chunk_table(payments, 0), chunk_table(rate, 0)]])
    expected, _ = driver_run(converting(True, None, 10_000), [*rate, *payments], "converted")
    assert sorted(expected) == [("EUR", "10x1.1", 10), ("EUR", "25xNone", 2)]
    assert sorted((k, v, ts) for _, k, v, ts in got) == sorted(expected)


AFTER_JOIN = {
    "tumbling-final": ("tumbling", Suppressed.until_window_closes(BufferConfig.unbounded())),
    "session-final": ("session", Suppressed.until_window_closes(BufferConfig.unbounded())),
    "sliding-final": ("sliding", Suppressed.until_window_closes(BufferConfig.unbounded())),
    "tumbling-limit-bounded": ("tumbling", Suppressed.until_time_limit(
        8, BufferConfig.max_records(2).emit_early_when_full())),
    "hopping-updates": ("hopping", None),
    "totals-limit": ("none", Suppressed.until_time_limit(8, BufferConfig.unbounded())),
}


def converted_then(case: str, left: bool, grace: int | None, rekey: bool) -> Topology:
    """The conversions, then per currency (``rekey``: per amount) the joined values folded
    in arrival order, in the windows and suppression of ``AFTER_JOIN[case]``."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()),
                    Materialized.versioned("rates", 10_000))
    payments = b.stream("payments", Consumed(key_serde=Serdes.string(),
                                             value_serde=Serdes.string())).filter(
        lambda currency, amount: amount != "skip")
    joiner = (lambda amount, rate: f"{amount}x{rate}")  # noqa: E731
    joined = (payments.left_join(rates, joiner, grace=grace) if left
              else payments.join(rates, joiner, grace=grace))
    grouped: Any = joined.group_by(lambda currency, value: value.split("x")[0]) if rekey \
        else joined.group_by_key()
    windows, suppressed = AFTER_JOIN[case]
    if windows != "none":
        grouped = grouped.windowed_by(_windows(windows))
    if windows == "session":
        table = grouped.aggregate(lambda: "", lambda k, v, agg: agg + v[-1],
                                  lambda k, a, b: a + b)
    else:
        table = grouped.aggregate(lambda: "", lambda k, v, agg: agg + v[-1])
    (table if suppressed is None else table.suppress(suppressed)).to_stream().to("out")
    return b.build()


@settings(max_examples=examples(100), deadline=None)
@given(data=rates_and_payments(), case=st.sampled_from(sorted(AFTER_JOIN)),
       left=st.booleans(), grace=st.sampled_from([None, 5]), rekey=st.booleans(),
       seed=st.integers(0, 3))
def test_aggregations_after_a_join_give_one_driver_per_partition(
        data: tuple[list[list[Piece]], list[list[Row]]], case: str, left: bool,
        grace: int | None, rekey: bool, seed: int) -> None:
    """The joined records reach the aggregation in their task's order, with its time: what
    one driver per partition gives; after a re-key, what one driver gives on the
    partitions' records partition after partition, each micro-batch."""
    assume(not rekey or grace is None)  # a driver's grace buffer would span the partitions
    batches, reads = data
    if rekey:  # one repartition partition: each micro-batch's partitions one after another
        reads = [[row for b, batch in enumerate(batches) for p in sorted({p for p, _ in batch})
                  for row in _task_reads(batch, p)]]
    got, drops = distributed_run(converted_then(case, left, grace, rekey), [
        [chunk_table(part, p) for p, part in batch] for batch in batches], seed)
    expected: Counter[Any] = Counter()
    expected_drops: Counter[str] = Counter()
    for rows in reads:
        records, dropped = driver_run(converted_then(case, left, grace, rekey), rows, "out")
        expected.update(records)
        expected_drops.update(dropped)
    assert (Counter((k, v, ts) for t, k, v, ts in got if t == "out"), drops) == \
        (expected, expected_drops)


def _task_reads(batch: list[Piece], partition: int) -> list[Row]:
    """A micro-batch's records of one partition as its task reads them."""
    by_topic: dict[str, list[tuple[Any, ...]]] = {}
    for p, part in batch:
        if p == partition:
            for topic, *record in part:
                by_topic.setdefault(topic, []).append(tuple(record))
    return [(t, *r) for t, records in merge_by_timestamp(by_topic) for r in records]


def _merged_then(step: str) -> Topology:
    """Topics a and b merged, without the records valued "skip", then ``step``: a join with
    the table "rates", or an aggregation concatenating values in arrival order (also after
    such a join, or a count of the joined records without windows)."""
    b = StreamsBuilder()
    consumed = Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())
    stream: Any = b.stream("a", consumed).merge(b.stream("b", consumed)).filter(
        lambda k, v: v != "skip")
    if step == "rekeyed join":
        stream = stream.map(lambda k, v: (v.split(":")[0], v.split(":")[1]))
    if "join" in step:
        rates = b.table("rates", consumed, Materialized.versioned("rates", 10_000))
        stream = stream.join(rates, lambda v, rate: f"{v}x{rate}")
        stream.to("side")
    if "count" in step:
        stream.group_by_key().count().to_stream().to("out")
    elif "concat" in step:
        stream.group_by_key().aggregate(lambda: "", lambda k, v, agg: agg + v[0]) \
            .to_stream().to("out")
    return b.build()


@pytest.mark.parametrize(("step", "rows", "split"), [
    # a record the filter drops still sets its topic's head: b's B@7 goes before a's A@5
    ("concat", [("a", b"k", b"skip", 9), ("a", b"k", b"A", 5), ("b", b"k", b"B", 7)],
     False),
    ("join", [("a", b"EUR", b"skip", 10), ("a", b"EUR", b"25", 5),
              ("rates", b"EUR", b"1.1", 5)], True),
    ("join", [("a", b"EUR", b"skip", 10), ("a", b"EUR", b"25", 5),
              ("rates", b"EUR", b"1.1", 5)], False),
    # the joined records reach the aggregation in the join's order, not merged again
    ("join, concat", [("rates", b"k", b"r", 0), ("a", b"z", b"X", 9), ("a", b"k", b"A", 5),
                      ("b", b"k", b"B", 7)], True),
    # a rate's deletion moves its topic's head, though the count drops null values
    ("join, count", [("rates", b"EUR", None, 5), ("rates", b"USD", b"1.1", 0),
                     ("a", b"USD", b"10", 3)], True),
    # at equal heads the source topic named first goes first, also after a re-key
    ("rekeyed join", [("rates", b"EUR", b"1.0", 0), ("a", b"p1", b"EUR:10", 5),
                      ("rates", b"EUR", b"2.0", 5)], True),
], ids=["dropped-head", "join-dropped-head-chunks", "join-dropped-head-one-chunk",
        "join-then-concat", "join-then-count-deletes", "rekeyed-join-tie"])
def test_a_task_merges_the_records_it_reads(step: str, rows: list[Row], split: bool) -> None:
    """Records a step drops still count where a task merges its topics (Kafka's
    PartitionGroup reads them); each topic a chunk of its own (``split``) or one chunk."""
    topics = sorted({row[0] for row in rows})
    chunks = [chunk_table([r for r in rows if r[0] == t], 0) for t in topics] if split \
        else [chunk_table(rows, 0)]
    got, drops = distributed_run(_merged_then(step), [chunks])
    for topic in ("out", "side"):
        expected, expected_drops = driver_run(_merged_then(step), task_order(rows, 1), topic)
        assert Counter((k, v, ts) for t, k, v, ts in got if t == topic) == Counter(expected)
    assert drops == expected_drops


@pytest.mark.parametrize("per_topic", [False, True], ids=["chunk-per-partition",
                                                          "chunk-per-topic-partition"])
def test_after_a_re_key_each_partition_keeps_its_order(per_topic: bool) -> None:
    """Topics a and b of two partitions, re-keyed to one key: the one repartition partition
    interleaves the partitions, each partition's records in its task's order (Y before X in
    partition 0, Z before W in partition 1), as a repartition topic receives them."""
    b = StreamsBuilder()
    consumed = Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())
    (b.stream("a", consumed).merge(b.stream("b", consumed)).map(lambda k, v: ("K", v))
     .group_by_key().aggregate(lambda: "", lambda k, v, agg: agg + v).to_stream().to("out"))
    parts = [[("a", b"x", b"X", 10), ("b", b"y", b"Y", 5)],
             [("a", b"z", b"Z", 1), ("b", b"w", b"W", 7)]]
    chunks = [chunk_table([row], p) for i in range(2) for p, rows in enumerate(parts)
              for row in rows[i:i + 1]] if per_topic else \
        [chunk_table(rows, p) for p, rows in enumerate(parts)]
    got, _ = distributed_run(b.build(), [chunks])
    final = max((v for _, _, v, _ in got), key=len)
    assert sorted(final) == ["W", "X", "Y", "Z"]
    assert final.index("Y") < final.index("X") and final.index("Z") < final.index("W")
