"""Table aggregations on the DistributedRunner: the driver's records and drops.

``b.table(topic).group_by(selector)`` followed by ``count``/``reduce``/``aggregate`` runs in
two batched processors of one query: the table's rows and its ``group_by``
(:mod:`topology.spark._regroup`), then the aggregation per new key
(:mod:`topology.spark._aggregations`). The Spark test reads a few small Parquet files (one
micro-batch each); once drained the sink must hold the driver's records (as multisets). The
bucket test runs both processors' work without Spark, micro-batch by micro-batch and bucket
by bucket as Spark calls them, and compares records and drops with the driver's.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from suppress.entry import RecordContext
from topology import Consumed, Serdes, StreamsBuilder, Topology
from topology.errors import IllegalStateError
from topology.spark import DistributedRunner, UnsupportedTopologyError, sinks
from topology.spark._aggregations import buckets
from topology.spark._compile import compile_topology
from topology.state.codec import decode, encode

from .harness import Handle, MapState, ValueState, chunk_table, distributed_run
from .helpers import Row, batches, driver_run, kafka_table, state_rows
from .test_distributed import as_multiset, driver_records, stream_of, write_parquet

S = Serdes.string()
TOPIC = "accounts"


_region: Any = lambda account, row: (  # noqa: E731 (by value: Spark's workers run it)
    None if row.split(":")[0] == "-" else row.split(":")[0], int(row.split(":")[1]))
"""An account row ``"region:balance"`` as ``(region, balance)``; ``"-:..."``: no region. A
lambda, which Spark pickles by value (its workers cannot import this test module)."""


def balances(kind: str, limit: int | None = None) -> Topology:
    """Accounts (``region:balance`` rows) totalled per region, every update or rate-limited."""
    b = StreamsBuilder()
    grouped = b.table(TOPIC, Consumed(key_serde=S, value_serde=S)).group_by(_region)
    if kind == "count":
        table = grouped.count()
    elif kind == "reduce":
        table = grouped.reduce(lambda total, n: total + n, lambda total, n: total - n)
    else:  # the history of the aggregate depends on the order of the updates
        table = grouped.aggregate(lambda: "", lambda region, n, log: log + f"+{n}",
                                  lambda region, n, log: log + f"-{n}")
    if limit is not None:
        table = table.suppress(Suppressed.until_time_limit(limit, BufferConfig.unbounded()))
    table.to_stream().to("out")
    return b.build()


def regroup_run(topology: Topology, parts: list[list[Row]]
                ) -> tuple[list[Any], Counter[str]]:
    """Records and drops of the two batched processors, run in this process as Spark calls
    them (:mod:`tests.spark.harness`): each part one micro-batch of input partition 0."""
    plan = compile_topology(topology)
    assert plan.batched is not None and plan.regroup is not None and buckets(plan.batched) > 1
    got, drops = distributed_run(topology, [[chunk_table(part, 0)] for part in parts])
    return [(key, value, ts) for _, key, value, ts in got], drops


@st.composite
def account_batches(draw: st.DrawFn, every_row_counts: bool = False) -> list[list[Row]]:
    """Account rows moving between regions, deleted, or without a region; null keys; time
    moving forward with jitter.

    ``every_row_counts``: each row changes an aggregate (no null keys, no rows without a
    region, no deletes): the time of a rate-limited aggregation then is the driver's, which
    moves only with the changes that reach it, where the runner's moves with every row (see
    the docs' time model).
    """
    n = draw(st.integers(1, 50))
    rows: list[Row] = []
    now = latest = 0
    for _ in range(n):
        now += draw(st.integers(0, 15))
        ts = max(0, now - draw(st.sampled_from([0, 0, 0, 5, 40])))
        key = draw(st.sampled_from([b"acct-1", b"acct-2", b"acct-3", b"acct-4"]
                                   + ([] if every_row_counts else [None])))
        value = draw(st.sampled_from([b"east:5", b"east:7", b"west:3", b"north:1"]
                                     + ([] if every_row_counts else [b"-:2", None])))
        if key is None:
            ts = min(ts, latest)  # dropped before the driver's time moves (see the docs)
        latest = max(latest, ts)
        rows.append((TOPIC, key, value, ts))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    return [rows[i:j] for i, j in zip([0, *cuts], [*cuts, n], strict=True)]


@settings(max_examples=examples(80), deadline=None)
@given(parts=account_batches(), kind=st.sampled_from(["count", "reduce", "aggregate"]))
def test_regrouped_buckets_give_the_driver_records_and_drops(parts: list[list[Row]],
                                                             kind: str) -> None:
    got, dropped = regroup_run(balances(kind), parts)
    expected, expected_drops = driver_run(balances(kind), [r for p in parts for r in p])
    assert Counter(got) == Counter(expected)
    assert dropped == expected_drops


@settings(max_examples=examples(60), deadline=None)
@given(parts=account_batches(every_row_counts=True),
       kind=st.sampled_from(["count", "reduce", "aggregate"]))
def test_rate_limited_table_aggregations_give_the_driver_records(parts: list[list[Row]],
                                                                 kind: str) -> None:
    got, _ = regroup_run(balances(kind, limit=30), parts)
    expected, _ = driver_run(balances(kind, limit=30), [r for p in parts for r in p])
    assert Counter(got) == Counter(expected)


def account_rows(seed: int, n: int = 200) -> list[Row]:
    """Accounts changing regions and balances, some deleted, in timestamp order."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for ts in sorted(rng.randrange(2_000) for _ in range(n)):
        key = f"acct-{rng.randrange(12)}".encode()
        value = None if rng.random() < 0.1 else \
            f"{rng.choice(['east', 'west', 'north'])}:{rng.randrange(100)}".encode()
        rows.append((TOPIC, key, value, ts))
    return rows


def test_a_deleted_table_row_leaves_the_state_store() -> None:
    """A row's delete removes its map entry; the key written again gets a new one."""
    from topology.spark._regroup import Regrouping

    plan = compile_topology(balances("count"))
    assert plan.regroup is not None and plan.batched is not None
    rows = MapState()

    def call(*records: tuple[str, str | None, int]) -> None:
        regrouping = Regrouping(plan.regroup, rows, plan.batched.key_serializer,
                                buckets(plan.batched))
        for seq, (key, value, ts) in enumerate(records):
            regrouping.process(key, value, RecordContext(ts, -1, TOPIC, 0, ()), seq, ts)
        regrouping.save()

    call(("acct-1", "east:5", 1), ("acct-2", "west:7", 2))
    assert sorted(rows.entries) == [(b"acct-1",), (b"acct-2",)]
    call(("acct-1", None, 3))
    assert sorted(rows.entries) == [(b"acct-2",)]
    call(("acct-1", "north:1", 4))
    assert decode(rows.entries[(b"acct-1",)][0]) == ("acct-1", "north:1", 4)
    assert rows.writes == 4


def test_table_rows_of_an_earlier_release_are_refused() -> None:
    """An earlier release kept a key group's table rows in one value: refused, not lost."""
    from topology.spark._regroup import RegroupProcessor
    from topology.spark._stages import FRAME

    plan = compile_topology(balances("count"))
    assert plan.regroup is not None and plan.batched is not None
    processor = RegroupProcessor(plan.regroup, plan.batched.key_serializer,
                                 buckets(plan.batched))
    earlier = ValueState()
    earlier.update((encode({b"acct-1": encode(("acct-1", "east:5", 3))}),))
    processor.init(Handle({"rows": earlier}))
    frame = pa.RecordBatch.from_pylist([], schema=FRAME).to_pandas()
    with pytest.raises(IllegalStateError, match="new checkpoint_dir"):
        list(processor.handleInputRows((0,), iter([frame]), None))


def test_a_table_aggregation_on_spark_gives_the_driver_records(rocksdb_state: Any,
                                                               tmp_path: Path) -> None:
    """The history of each region's aggregate shows the order of its changes; Spark's
    state store holds a row per account (the table) and per region (the aggregate)."""
    kind = "aggregate"
    data = account_rows(seed=17)
    write_parquet(tmp_path / "in", [kafka_table(list(p)) for p in batches(data, 3)])
    out = sinks.memory()
    runner = DistributedRunner(balances(kind), sources={TOPIC: stream_of(rocksdb_state,
                                                                         tmp_path / "in")},
                               sinks={"out": out}, checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    expected = driver_records(balances(kind), data, "out")
    assert len(expected) > 150
    assert as_multiset(out.read_records_to_list()) == as_multiset(expected)
    assert runner.metrics()["records-out-total"] == len(expected)
    latest = {key: value for _, key, value, _ in data}
    accounts = sorted(state_rows(rocksdb_state, tmp_path / "chk", 1, "table"))
    assert accounts == sorted(key for key, value in latest.items() if value is not None)
    regions = sorted(state_rows(rocksdb_state, tmp_path / "chk", 0, "aggregates"))
    assert regions == sorted({r.key.encode() for r in expected})


def _table_read_twice() -> Topology:
    b = StreamsBuilder()
    accounts = b.table(TOPIC, Consumed(key_serde=S, value_serde=S))
    accounts.group_by(_region).count().to_stream().to("out")
    accounts.to_stream().to("copy")
    return b.build()


def test_a_table_aggregation_on_a_table_read_elsewhere_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedTopologyError, match=r"KTABLE-AGGREGATE-\d+.*group_by"):
        DistributedRunner(_table_read_twice(), sources={}, sinks={"out": sinks.memory()},
                          checkpoint_dir=str(tmp_path), ignore_topics=["copy"])
