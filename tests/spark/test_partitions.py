"""Kafka's task model in the ForeachBatchRunner: a task per input partition.

Properties run the engine the runner runs (no Spark: micro-batches as they are decoded)
against one driver per partition; Spark tests run the runner on real micro-batches holding
several partitions.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Grouped,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from topology.runtime.clock import MockClock
from topology.runtime.engine import Engine, merge_by_timestamp
from topology.runtime.outputs import plain_records
from topology.runtime.partitioner import partition_for
from topology.spark import CheckpointMismatchError, ForeachBatchRunner, sinks
from topology.spark._compat import frame_of

from .helpers import KAFKA_SOURCE

S = Serdes.string()


def final_counts(size: int = 100, grace: int = 20) -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(size, grace))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def counts_by_page() -> Topology:
    """Re-keys clicks by page: a repartition topic between the source and the count."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .group_by(lambda user, page: page, Grouped(key_serde=S, value_serde=S))
     .count()
     .to_stream()
     .to("page-counts"))
    return b.build()


Record = tuple[int, str, str, int]
"""(partition, key, value, timestamp)"""


@st.composite
def partitioned_streams(draw: Any) -> tuple[list[Record], list[int], list[int]]:
    """Records of several partitions (each key in one partition), out of order within a
    partition, interleaved at random; the batch split points; the order partitions are
    handed over in each batch."""
    partitions = draw(st.integers(1, 4))
    n = draw(st.integers(0, 60))
    disorder = draw(st.integers(0, 40))
    per_partition: list[list[Record]] = []
    for p in range(partitions):
        times = draw(st.lists(st.integers(0, disorder), min_size=n, max_size=n))
        keys = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
        per_partition.append([(p, f"p{p}-k{k}", f"v{i}", max(0, i * 10 - back))
                              for i, (back, k) in enumerate(zip(times, keys, strict=True))])
    picks = draw(st.permutations([p for p in range(partitions) for _ in range(n)]))
    cursors = [0] * partitions
    records = []
    for p in picks:
        records.append(per_partition[p][cursors[p]])
        cursors[p] += 1
    cuts = sorted(draw(st.lists(st.integers(0, len(records)), max_size=3)))
    order = draw(st.permutations(range(partitions)))
    return records, cuts, list(order)


def run_engine(topology: Topology, records: list[Record], cuts: list[int],
               order: list[int], partitions: int | None = None) -> list[TestRecord]:
    """The runner's engine over the batches: each batch's partitions in ``order``."""
    engine = Engine(topology, MockClock(0), "app", partitioned=True, partitions=partitions,
                    log_outputs=False, auto_commit=False)
    out: list[TestRecord] = []
    try:
        bounds = [0, *cuts, len(records)]
        for start, end in zip(bounds, bounds[1:], strict=False):
            by_partition: dict[int, dict[str, list[tuple[Any, ...]]]] = {}
            for p, key, value, ts in records[start:end]:
                by_partition.setdefault(p, {}).setdefault("clicks", []).append((key, value, ts))
            for p in [p for p in order if p in by_partition]:
                engine.process(p, merge_by_timestamp(by_partition[p]))
            engine.drain_routed()
            engine.commit()
            for topic, queue in engine.outputs.items():
                if topic in topology.sink_topics - topology.internal_topics:
                    out.extend(plain_records(queue))
                queue.clear()
    finally:
        engine.close()
    return out


def driver_records(topology: Topology, records: list[Record], topic: str) -> list[TestRecord]:
    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic("clicks")
        for _, key, value, ts in records:
            source.pipe_input(key, value, timestamp=ts)
        return driver.create_output_topic(topic).read_records_to_list()


def key_of(record: TestRecord) -> str:
    return str(record.key.key if hasattr(record.key, "key") else record.key)


@given(partitioned_streams())
def test_several_partitions_equal_one_driver_per_partition(
        stream: tuple[list[Record], list[int], list[int]]) -> None:
    records, cuts, order = stream
    topology = final_counts()
    got = run_engine(topology, records, cuts, order)
    for p in {r[0] for r in records}:
        mine = [r for r in records if r[0] == p]
        expected = driver_records(final_counts(), mine, "counts")
        assert [r for r in got if key_of(r).startswith(f"p{p}-")] == expected


@given(partitioned_streams(), st.integers(1, 5))
def test_a_rekeyed_count_meets_each_key_in_its_partitions_task(
        stream: tuple[list[Record], list[int], list[int]], partitions: int) -> None:
    records, cuts, order = stream
    records = [(p % partitions, key, value, ts) for p, key, value, ts in records]
    pages = [(p, key, f"/page{i % 4}", ts) for i, (p, key, _, ts) in enumerate(records)]
    got = run_engine(counts_by_page(), pages, cuts, order, partitions=partitions)
    final: dict[str, int] = {}
    for record in got:  # each page's counts go up by one, from one task
        assert record.value == final.get(record.key, 0) + 1
        final[record.key] = record.value
    assert final == dict(Counter(page for _, _, page, _ in pages))


def test_merge_takes_the_lowest_head_timestamp_and_keeps_each_topics_order() -> None:
    runs = merge_by_timestamp({"b": [("x", 1, 10), ("x", 2, 3)], "a": [("y", 1, 5)],
                               "c": []})
    assert runs == [("a", [("y", 1, 5)]), ("b", [("x", 1, 10), ("x", 2, 3)])]


def test_a_rekeying_topology_needs_the_partition_count() -> None:
    engine = Engine(counts_by_page(), MockClock(0), "app", partitioned=True)
    try:
        engine.check_partitions([0])
        with pytest.raises(ValueError, match="partitions=N"):
            engine.check_partitions([0, 2])
    finally:
        engine.close()
    engine = Engine(counts_by_page(), MockClock(0), "app", partitioned=True, partitions=2)
    try:
        with pytest.raises(ValueError, match="below 2"):
            engine.check_partitions([2])
    finally:
        engine.close()


def test_rekeyed_state_lives_in_the_task_of_the_keys_partition(tmp_path: Any) -> None:
    records = [(i % 3, f"user{i}", f"/page{i % 7}", i) for i in range(60)]
    engine = Engine(counts_by_page(), MockClock(0), "app", partitioned=True, partitions=3,
                    log_outputs=False, auto_commit=False, state_dir=tmp_path)
    try:
        for p in range(3):
            engine.process(p, [("clicks", [(k, v, ts) for q, k, v, ts in records if q == p])])
        engine.drain_routed()
        engine.commit()
        for p, task in engine.tasks.items():
            (store,) = [s for name, s in task.stores.items() if "STORE" in name]
            for key, _ in store.all():
                assert partition_for(S.serialize(key), 3) == p
    finally:
        engine.close()
    with pytest.raises(ValueError, match="partitions=3, not 4"):
        Engine(counts_by_page(), MockClock(0), "app", partitioned=True, partitions=4,
               state_dir=tmp_path)


# -- on Spark -----------------------------------------------------------------------------------

def kafka_partitions_df(spark: Any, records: list[Record]) -> Any:
    """Spark's Kafka source schema, partition by partition as Kafka's source hands them."""
    records = sorted(records, key=lambda r: r[0])  # stable: each partition keeps its order
    offsets: Counter[int] = Counter()
    rows = []
    for p, key, value, ts in records:
        rows.append((key.encode(), value.encode(), p, offsets[p], ts))
        offsets[p] += 1
    table = pa.table({
        "key": pa.array([r[0] for r in rows], pa.binary()),
        "value": pa.array([r[1] for r in rows], pa.binary()),
        "topic": pa.array(["clicks"] * len(rows), pa.string()),
        "partition": pa.array([r[2] for r in rows], pa.int32()),
        "offset": pa.array([r[3] for r in rows], pa.int64()),
        "timestamp": pa.array([r[4] * 1000 for r in rows], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * len(rows), pa.int32()),
    }, schema=KAFKA_SOURCE)
    return frame_of(spark, table)


def three_partitions_in_order(n: int = 600) -> list[Record]:
    """The 61 % case: 3 partitions of in-order records over 60 s, 5 s windows, 1 s grace."""
    return [(i % 3, f"p{i % 3}-user{i % 5}", "x", (i // 3) * 60_000 * 3 // n)
            for i in range(n)]


def driver_drops(topology: Topology, records: list[Record]) -> float:
    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic("clicks")
        for _, key, value, ts in records:
            source.pipe_input(key, value, timestamp=ts)
        return driver.metrics()["dropped-records-total"]


@pytest.mark.parametrize("shuffled", [False, True], ids=["in-order", "out-of-order"])
def test_a_batch_of_several_partitions_drops_nothing_kafka_keeps(spark: Any,
                                                                 shuffled: bool) -> None:
    records = three_partitions_in_order()
    if shuffled:  # out of order within each partition, by up to 500 ms
        rng = random.Random(3)
        records = [(p, k, v, max(0, ts - rng.randrange(500))) for p, k, v, ts in records]
    topology = final_counts(5_000, 1_000)
    sink = sinks.memory()
    with ForeachBatchRunner(final_counts(5_000, 1_000), sinks={"counts": sink}) as runner:
        half = len(records) // 2
        runner(kafka_partitions_df(spark, records[:half]), 0)
        runner(kafka_partitions_df(spark, records[half:]), 1)
        assert runner.last_progress is not None
        assert runner.last_progress.partitions == (0, 1, 2)
        totals = runner.totals
        assert totals.batches == 2 and totals.records_in == {"clicks": len(records)}
    got = sink.read_records_to_list()
    for p in range(3):
        mine = [r for r in records if r[0] == p]
        expected = driver_records(topology, mine, "counts")
        assert [r for r in got if key_of(r).startswith(f"p{p}-")] == expected
    dropped = totals.dropped.get("expired-window", 0)
    assert dropped == sum(
        int(driver_drops(topology, [r for r in records if r[0] == p]))
        for p in range(3))
    if not shuffled:
        assert dropped == 0


def test_a_used_state_with_a_new_checkpoint_is_refused(spark: Any, tmp_path: Any) -> None:
    records = three_partitions_in_order(60)
    calls: list[int] = []

    def sink(out: list[TestRecord], batch_id: int) -> None:
        calls.append(batch_id)

    state = tmp_path / "state"
    with ForeachBatchRunner(final_counts(), state_dir=state, sinks={"counts": sink}) as runner:
        for batch_id in range(3):
            runner(kafka_partitions_df(spark, records[batch_id * 20:batch_id * 20 + 20]),
                   batch_id)
    calls.clear()
    with ForeachBatchRunner(final_counts(), state_dir=state, sinks={"counts": sink}) as runner:
        with pytest.raises(CheckpointMismatchError, match="micro-batch 0 .* committed batch 2"):
            runner(kafka_partitions_df(spark, records), 0)  # a new checkpoint starts at 0
        with pytest.raises(CheckpointMismatchError, match="behind"):
            runner(kafka_partitions_df(spark, records), 5)  # the state lost batches 3 and 4
        assert calls == []
        runner(kafka_partitions_df(spark, records[:5]), 3)  # the next batch still runs
        assert calls == [3] and runner.committed_batch_id == 3
        assert runner.totals.batches == 4


def test_state_on_a_uri_survives_losing_the_local_copy(spark: Any, tmp_path: Any) -> None:
    records = [(i % 2, f"p{i % 2}-user{i % 3}", "x", i * 7) for i in range(300)]
    parts = [records[i:i + 50] for i in range(0, 300, 50)]
    remote = "file://" + str(tmp_path / "remote" / "state")
    got = sinks.memory()
    for start in range(0, 6, 2):  # a new node every two batches: an empty local copy
        with ForeachBatchRunner(final_counts(), state_dir=remote, local_dir=tmp_path / "local",
                                sinks={"counts": got}) as runner:
            assert runner.committed_batch_id == (None if start == 0 else start - 1)
            if start:
                runner(kafka_partitions_df(spark, parts[start - 1]), start - 1)  # a replay
                assert runner.last_progress is not None and runner.last_progress.skipped
            for batch_id in (start, start + 1):
                runner(kafka_partitions_df(spark, parts[batch_id]), batch_id)
        shutil.rmtree(tmp_path / "local")
    out = got.read_records_to_list()
    for p in range(2):
        expected = driver_records(final_counts(), [r for r in records if r[0] == p], "counts")
        assert [r for r in out if key_of(r).startswith(f"p{p}-")] == expected
    assert len(out) > 10
