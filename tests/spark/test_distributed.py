"""DistributedRunner on the shared local SparkSession: the driver's records, refusals, mappings.

Each query reads a few small Parquet files (one micro-batch each, in timestamp order), so
that once drained the sinks must hold the driver's output records (compared as multisets:
Spark's order differs).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.spark import (
    ColumnMappingError,
    Columns,
    DistributedRunner,
    UnsupportedTopologyError,
    sinks,
)

from .helpers import Row, batches, kafka_df, kafka_table, pipe_rows, state_rows, task_order
from .test_foreach_batch import final_counts

S, L = Serdes.string(), Serdes.long()


def rekeyed_totals() -> Topology:
    """Stateless steps before and after a hopping-window reduce, and a side branch."""
    b = StreamsBuilder()
    payments = b.stream("payments", Consumed(key_serde=S, value_serde=Serdes.json()))
    payments.filter(lambda k, p: p["amount"] > 900).map_values(lambda p: p["amount"]).to("big")
    (payments
     .filter(lambda k, p: p["currency"] != "JPY")
     .map(lambda k, p: (p["account"], p["amount"]))
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(200, 30).advance_by(100))
     .reduce(lambda total, amount: total + amount)
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .filter(lambda w, total: total > 500)
     .map(lambda w, total: (w.key, (w.window.start, total)))
     .to("totals"))
    return b.build()


def page_lists() -> Topology:
    """aggregate() whose result depends on arrival order; flat_map_values and select_key."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .flat_map_values(lambda page: page.split("+"))
     .select_key(lambda user, page: user[:6])
     .group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(150))
     .aggregate(lambda: "", lambda user, page, pages: pages + page[-1])
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("pages"))
    return b.build()


def page_sessions() -> Topology:
    """Sessions (records exactly the gap apart share one) folded with a merger, then mapped."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(20, 15))
     .aggregate(lambda: "", lambda user, page, pages: pages + page[-1],
                lambda user, one, other: one + "|" + other)
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .map(lambda session, pages: (session.key, (session.window.start, session.window.end,
                                                pages)))
     .to("sessions"))
    return b.build()


def stateless_only() -> Topology:
    """No state at all: one mapInArrow per source and the sinks."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .flat_map_values(lambda page: page.split("+"))
     .filter_not(lambda user, page: page == "/c")
     .map(lambda user, page: (page, len(user)))
     .to("pages"))
    return b.build()


def click_rows(seed: int, n: int = 240) -> list[Row]:
    rng = random.Random(seed)
    users = [f"user-{i}" for i in range(5)]
    pages = ["/a", "/b", "/c", "/a+/b"]
    return [("clicks", rng.choice(users).encode(), rng.choice(pages).encode(), ts)
            for ts in sorted(rng.randrange(1_500) for _ in range(n))]


def session_click_rows(seed: int) -> list[Row]:
    """Clicks, and one more whose session the last click leaves 1 ms short of closing."""
    rows = click_rows(seed)
    boundary = rows[-1][3] - 35  # gap 20 + grace 15: open until stream time boundary + 36
    return sorted([*rows, ("clicks", b"user-9", b"/a", boundary)], key=lambda r: r[3])


def payment_rows(seed: int, n: int = 240) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for i, ts in enumerate(sorted(rng.randrange(2_000) for _ in range(n))):
        payment = {"account": f"acct-{rng.randrange(4)}", "amount": rng.randrange(1, 1000),
                   "currency": rng.choice(["EUR", "USD", "JPY"])}
        rows.append(("payments", f"p{i}".encode(), json.dumps(payment).encode(), ts))
    return rows


def write_parquet(folder: Path, tables: list[pa.Table]) -> None:
    """One file per table, renamed in whole, modification times in order (one batch each)."""
    folder.mkdir()
    for n, table in enumerate(tables):
        staged = folder.parent / f".{folder.name}-{n}.parquet"
        pq.write_table(table, staged)
        os.utime(staged, (1_000_000 + n, 1_000_000 + n))
        os.rename(staged, folder / f"part-{n}.parquet")


def stream_of(spark: Any, folder: Path) -> Any:
    schema = spark.read.parquet(str(folder)).schema
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))


def driver_records(topology: Topology, rows: list[Row], topic: str) -> list[Any]:
    with TopologyTestDriver(topology) as driver:
        inputs = {}
        for name, key, value, ts in rows:
            if name not in inputs:
                inputs[name] = driver.create_input_topic(name, Serdes.bytes(), Serdes.bytes())
            inputs[name].pipe_input(key, value, timestamp=ts)
        return driver.create_output_topic(topic).read_records_to_list()


def as_multiset(records: list[Any]) -> Counter[Any]:
    return Counter((r.key, r.value, r.timestamp, tuple(r.headers)) for r in records)


# -- drained, the sinks hold the driver's records ----------------------------------------------

def test_sessions_from_kafka_schema_files_give_the_driver_records(spark: Any, tmp_path: Path
                                                                 ) -> None:
    """Sessions in many key groups, one left 1 ms short of closing by the last click."""
    data = session_click_rows(seed=11)
    write_parquet(tmp_path / "in", [kafka_table(part) for part in batches(data, 3)])
    out = sinks.memory()
    DistributedRunner(page_sessions(), sources={"clicks": stream_of(spark, tmp_path / "in")},
                      sinks={"sessions": out}, checkpoint_dir=str(tmp_path / "chk")
                      ).run_available()
    expected = driver_records(page_sessions(), data, "sessions")
    assert len(expected) > 5
    assert as_multiset(out.read_records_to_list()) == as_multiset(expected)


def test_kafka_frames_are_computed_on_the_executors(spark: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A kafka_frame sink gets a frame Spark computes from the batch: no row reaches the
    driver, no frame is built from driver-side rows, and the rows are the driver's records
    in Kafka's columns. (A re-keyed aggregation's records written on the executors: the
    parquet test.)"""
    topology, topic = final_counts, "counts"
    data = click_rows(seed=11)
    write_parquet(tmp_path / "in", [kafka_table(part) for part in batches(data, 3)])
    data_frame = type(spark.range(1))
    collect = data_frame.toArrow
    frames: list[pa.Table] = []
    sink = sinks.kafka_frame(lambda df, batch_id: frames.append(collect(df)))

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the runner collected a batch or built a frame on the driver")

    runner = DistributedRunner(topology(), sources={"clicks": stream_of(spark, tmp_path / "in")},
                               sinks={topic: sink}, checkpoint_dir=str(tmp_path / "chk"))
    forbid_the_driver(monkeypatch, spark, forbidden)
    runner.run_available()
    monkeypatch.undo()
    expected = driver_records(topology(), data, topic)
    assert len(expected) > 5
    got = [row for frame in frames for row in frame.to_pylist()]
    assert Counter(map(repr, got)) == Counter(map(repr, sink.table(expected).to_pylist()))
    assert runner.metrics()[f"records-out-total{{topic={topic}}}"] == len(expected)


def forbid_the_driver(monkeypatch: pytest.MonkeyPatch, spark: Any, forbidden: Any) -> None:
    """The DataFrame methods that bring a batch's rows to the driver, and building a frame
    from driver-side rows, raise ``forbidden``; only a parquet sink's tasks' summaries (a
    file name and a count per task) may be collected."""
    data_frame = type(spark.range(1))
    collect = data_frame.collect

    def summaries_only(frame: Any) -> Any:
        return collect(frame) if frame.columns == ["file", "records"] else forbidden()

    for name in ("toArrow", "toPandas", "toLocalIterator", "take", "head", "tail"):
        monkeypatch.setattr(data_frame, name, forbidden)
    monkeypatch.setattr(data_frame, "collect", summaries_only)
    monkeypatch.setattr(type(spark), "createDataFrame", forbidden)


def test_parquet_files_are_written_by_the_executors(spark: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of three state partitions' tasks writes its records as a file of the batch: no
    row reaches the driver, and the files hold the driver's records."""
    data = click_rows(seed=12)
    write_parquet(tmp_path / "in", [kafka_table(part) for part in batches(data, 2)])

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the runner collected a batch or built a frame on the driver")

    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        runner = DistributedRunner(page_lists(),
                                   sources={"clicks": stream_of(spark, tmp_path / "in")},
                                   sinks={"pages": sinks.parquet(tmp_path / "pages")},
                                   checkpoint_dir=str(tmp_path / "chk"))
        with monkeypatch.context() as patched:
            forbid_the_driver(patched, spark, forbidden)
            runner.run_available()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    expected = driver_records(page_lists(), data, "pages")
    assert len(expected) > 5
    per_batch = [len(list(batch.glob("*.parquet")))
                 for batch in (tmp_path / "pages").glob("batch_id=*")]
    assert max(per_batch) == 3  # a file from each state partition's task
    table = pq.read_table(tmp_path / "pages")
    written = zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                  table.column("timestamp").cast("int64").to_pylist(), strict=True)  # ms
    assert Counter((Windowed(k["key"], Window(k["start"], k["end"])), v, ts)
                   for k, v, ts in written) == Counter((r.key, r.value, r.timestamp)
                                                       for r in expected)
    assert runner.metrics()["records-out-total{topic=pages}"] == len(expected)


def driver_metrics(topology: Topology, rows: list[Row]) -> dict[str, float]:
    with TopologyTestDriver(topology) as driver:
        pipe_rows(driver, rows)
        return driver.metrics()


def drops(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k.startswith("dropped-records-total") and v}


def test_metrics_count_late_and_null_key_records_as_the_driver(spark: Any, tmp_path: Path
                                                                ) -> None:
    """A record behind its partition's stream time and a null key. (A reduce's drops: the
    harness properties of test_distributed_aggregations.py.)"""
    topology = final_counts
    first, second, third = batches(click_rows(seed=5), 3)
    late = [("clicks", b"user-1", b"/late", 5), ("clicks", None, b"/none", third[0][3])]
    parts = [first, second, [*late, *third]]
    data = [r for part in parts for r in part]
    write_parquet(tmp_path / "in", [kafka_table(part) for part in parts])
    out = sinks.memory()
    runner = DistributedRunner(topology(), sources={"clicks": stream_of(spark, tmp_path / "in")},
                               sinks={"counts": out}, checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    expected = driver_records(topology(), data, "counts")
    assert as_multiset(out.read_records_to_list()) == as_multiset(expected)
    metrics = runner.metrics()
    in_driver = driver_metrics(topology(), data)
    assert drops(metrics) == drops(in_driver) == {
        "dropped-records-total": 2.0, "dropped-records-total{reason=expired-window}": 1.0,
        "dropped-records-total{reason=null-key}": 1.0}
    assert metrics["records-in-total"] == len(data)
    assert metrics["records-out-total"] == metrics["records-out-total{topic=counts}"] == \
        len(expected)


def test_custom_columns_of_spark_types(spark: Any, tmp_path: Path) -> None:
    """Typed columns (string key, epoch-ms bigint) over two files; a runner built again on
    the local checkpoint starts from the totals kept there. (A restart's records: the
    metrics test of test_distributed_sources.py, on a file: URI.)"""
    data = click_rows(seed=5)

    def table(part: list[Row]) -> pa.Table:
        return pa.table({"user": [r[1].decode() for r in part],
                         "page": [r[2].decode() for r in part],
                         "ms": pa.array([r[3] for r in part], pa.int64())})

    folder = tmp_path / "in"
    write_parquet(folder, [table(data[:120]), table(data[120:])])
    counts = sinks.memory()

    def runner() -> DistributedRunner:
        return DistributedRunner(final_counts(), sources={"clicks": stream_of(spark, folder)},
                                 sinks={"counts": counts}, checkpoint_dir=str(tmp_path / "chk"),
                                 columns=Columns(key="user", value="page", timestamp="ms"))

    first = runner()
    first.run_available()
    got = counts.read_records_to_list()
    assert all(type(r.key) is Windowed and type(r.key.key) is str for r in got)
    assert as_multiset(got) == as_multiset(driver_records(final_counts(), data, "counts"))
    assert first.metrics()["records-in-total"] == len(data)
    assert runner().metrics() == first.metrics()


def test_stateless_steps_a_reduce_and_a_branch_into_parquet_and_callable_sinks(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver collects the batch for the callable; the parquet files are still the
    executors' (the driver never writes them)."""
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the driver wrote the parquet sink's records")

    monkeypatch.setattr(sinks.ParquetSink, "__call__", forbidden)
    data = payment_rows(seed=3)
    write_parquet(tmp_path / "in", [kafka_table(part) for part in batches(data, 3)])
    calls: list[tuple[int, list[Any]]] = []
    runner = DistributedRunner(
        rekeyed_totals(), sources={"payments": stream_of(spark, tmp_path / "in")},
        sinks={"totals": sinks.parquet(tmp_path / "totals"),
               "big": lambda records, batch_id: calls.append((batch_id, records))},
        checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    written = spark.read.parquet(str(tmp_path / "totals")).toArrow().to_pylist()
    expected = driver_records(rekeyed_totals(), data, "totals")
    assert len(expected) > 5
    assert Counter((r["key"], tuple(r["value"]), r["timestamp"].timestamp() * 1000)
                   for r in written) == Counter((r.key, r.value, r.timestamp) for r in expected)
    big = [r for _, records in calls for r in records]
    assert as_multiset(big) == as_multiset(driver_records(rekeyed_totals(), data, "big"))
    assert [b for b, _ in calls] == sorted(b for b, _ in calls)


# -- until_time_limit in batched transformWithState processors ---------------------------------

def rate_limited_levels(config: Any = None) -> Topology:
    b = StreamsBuilder()
    (b.table("levels", Consumed(key_serde=S, value_serde=L))
     .suppress(Suppressed.until_time_limit(50, config or BufferConfig.unbounded()))
     .to_stream()
     .map_values(lambda level: None if level is None else level * 10)
     .to("levels-limited"))
    return b.build()


def level_rows(seed: int, n: int = 300) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for ts in sorted(rng.randrange(1_000) for _ in range(n)):
        key = f"sensor-{rng.randrange(12)}".encode()
        value = None if rng.random() < 0.1 else L.serialize(rng.randrange(-50, 50))
        rows.append(("levels", key, value, ts))
    return rows


def converted_payments(grace: int | None = None, retention: int = 400) -> Topology:
    """Payments re-keyed to their currency, left-joined as of their time with a versioned
    table (an inner join runs before the windows of converted_totals)."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=S, value_serde=Serdes.json()),
                    Materialized.versioned("rates", retention))
    payments = (b.stream("payments", Consumed(key_serde=S, value_serde=Serdes.json()))
                .map(lambda k, p: (p["currency"], (p["account"], p["amount"]))))
    (payments.left_join(rates, lambda p, rate: (p[0], None if rate is None
                                                 else round(p[1] * rate, 2)), grace=grace)
     .filter(lambda currency, converted: converted[1] != 0)
     .to("converted"))
    return b.build()


def rate_rows(seed: int, n: int = 60, spread: int = 2_000) -> list[Row]:
    """Rates of three currencies (one never quoted by payments), some deleted."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for ts in sorted(rng.randrange(spread) for _ in range(n)):
        value = None if rng.random() < 0.1 else json.dumps(rng.randrange(50, 150) / 100)
        rows.append(("rates", rng.choice(["EUR", "USD", "GBP"]).encode(),
                     None if value is None else value.encode(), ts))
    return rows


def join_case(rows: list[Row], n: int) -> list[tuple[list[Row], list[Row]]]:
    """The rows cut in n time ranges; per range, its rates and its payments."""
    parts = batches(rows, n)
    return [([r for r in p if r[0] == "rates"], [r for r in p if r[0] == "payments"])
            for p in parts]


def run_join(spark: Any, tmp_path: Path, topology: Topology,
             parts: list[tuple[list[Row], list[Row]]]) -> list[Any]:
    write_parquet(tmp_path / "rates", [kafka_table(r) for r, _ in parts])
    write_parquet(tmp_path / "payments", [kafka_table(p) for _, p in parts])
    out = sinks.memory()
    DistributedRunner(topology, sources={"rates": stream_of(spark, tmp_path / "rates"),
                                         "payments": stream_of(spark, tmp_path / "payments")},
                      sinks={"converted": out},
                      checkpoint_dir=str(tmp_path / "chk")).run_available()
    return list(out.read_records_to_list())


def test_a_left_as_of_join_with_grace_gives_the_driver_records_and_drops(
        rocksdb_state: Any, tmp_path: Path) -> None:
    """Payments joined as of their time, held back 150 ms for late rates, some with no rate,
    the payments and rates in one DataFrame (as one Kafka source of both topics); a rate
    with a null key and one older than the history retention are dropped, and the drops
    reach the runner's metrics. (Joins without grace, inner joins and out-of-order
    rates run through the join's processor without Spark: test_join_buckets.py.)"""
    grace = 150
    rows = sorted(rate_rows(seed=7) + payment_rows(seed=8, n=120), key=lambda r: r[3])
    first, second = join_case(rows, 2)
    dropped: list[Row] = [("rates", None, b"1.0", second[0][0][3]), ("rates", b"EUR", b"1.0", 0)]
    parts = [first, ([*dropped, *second[0]], second[1])]
    write_parquet(tmp_path / "both", [kafka_table([*r, *p]) for r, p in parts])
    out = sinks.memory()
    runner = DistributedRunner(converted_payments(grace),
                               sources=stream_of(rocksdb_state, tmp_path / "both"),
                               sinks={"converted": out}, checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    progress = runner.query.recentProgress  # one DataFrame of both topics, each row read once
    assert {len(p.sources) for p in progress} == {1}
    assert sum(p.numInputRows for p in progress) == len(rows) + len(dropped)
    early, late = batches(rows, 2)
    data = [*early, *dropped, *late]  # in timestamp order but for the two dropped rates
    with TopologyTestDriver(converted_payments(grace)) as driver:
        inputs = {t: driver.create_input_topic(t, Serdes.bytes(), Serdes.bytes())
                  for t in ("rates", "payments")}
        for name, key, value, ts in data:
            inputs[name].pipe_input(key, value, timestamp=ts)
        expected = driver.create_output_topic("converted").read_records_to_list()
        in_driver = driver.metrics()
    assert len(expected) > 40 and any(r.value[1] is None for r in expected)
    assert as_multiset(out.read_records_to_list()) == as_multiset(expected)
    assert drops(runner.metrics()) == drops(in_driver) == {
        "dropped-records-total": 2.0, "dropped-records-total{reason=expired-version}": 1.0,
        "dropped-records-total{reason=null-key}": 1.0}
    histories = state_rows(rocksdb_state, tmp_path / "chk", 0, "histories")
    assert sorted(histories) == [b"EUR", b"GBP", b"USD"]  # a row of Spark's state per key


def converted_totals(window: TimeWindows, grace: int | None = None) -> Topology:
    """The as-of join (with a grace period if given), re-keyed by account, then final
    windowed totals, filtered and mapped; a side branch of the joined records to its own
    topic."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=S, value_serde=Serdes.json()),
                    Materialized.versioned("rates", 400))
    converted = (b.stream("payments", Consumed(key_serde=S, value_serde=Serdes.json()))
                 .map(lambda k, p: (p["currency"], (p["account"], p["amount"])))
                 .join(rates, lambda p, rate: (p[0], round(p[1] * rate, 2)), grace=grace))
    converted.filter(lambda currency, c: c[1] > 900).to("converted")
    (converted
     .group_by(lambda currency, c: c[0])
     .windowed_by(window)
     .reduce(lambda total, c: (c[0], round(total[1] + c[1], 2)))
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .filter(lambda w, total: total[1] > 400)
     .map(lambda w, total: (w.key, (w.window.start, total[1])))
     .to("totals"))
    return b.build()


def test_an_as_of_join_then_a_windowed_aggregation(rocksdb_state: Any, tmp_path: Path
                                                   ) -> None:
    """Two stateful steps chained in one query: the join's records feed a hopping window's
    batched processor; the join's grace period holds records back, so the window sees them
    later. The rates and payments arrive out of order (each up to 400 ms late, a few late
    for their window): the sinks hold what the driver gives on them in the task's order."""
    window, grace = TimeWindows.of_size_and_grace(300, 50).advance_by(100), 120
    rng = random.Random(4)
    rows = sorted(rate_rows(seed=2) + payment_rows(seed=12, n=150),
                  key=lambda r: r[3] + rng.randrange(400))  # arrival: the time plus a delay
    parts = join_case(rows, 3)
    write_parquet(tmp_path / "rates", [kafka_table(r) for r, _ in parts])
    write_parquet(tmp_path / "payments", [kafka_table(p) for _, p in parts])
    out = {"totals": sinks.memory(), "converted": sinks.memory()}
    runner = DistributedRunner(
        converted_totals(window, grace),
        sources={"rates": stream_of(rocksdb_state, tmp_path / "rates"),
                 "payments": stream_of(rocksdb_state, tmp_path / "payments")},
        sinks=out, checkpoint_dir=str(tmp_path / "chk"))
    runner.run_available()
    for topic in out:
        expected = driver_records(converted_totals(window, grace), task_order(rows, 3), topic)
        assert len(expected) > 5, topic
        assert as_multiset(out[topic].read_records_to_list()) == as_multiset(expected), topic
    in_driver = driver_metrics(converted_totals(window, grace), task_order(rows, 3))
    assert in_driver.get("dropped-records-total{reason=expired-window}", 0) > 0  # late ones
    assert drops(runner.metrics()) == drops(in_driver)


def test_table_updates_before_out_of_order_payments(rocksdb_state: Any, tmp_path: Path
                                                    ) -> None:
    """Every rate before the payments, which come in any order (all within retention)."""
    rates = rate_rows(seed=3, n=40)
    rng = random.Random(5)
    payments = payment_rows(seed=6, n=90)
    rng.shuffle(payments)
    parts = [(rates[:20], []), (rates[20:], payments[:45]), ([], payments[45:])]
    got = run_join(rocksdb_state, tmp_path, converted_payments(retention=5_000), parts)
    expected = driver_records(converted_payments(retention=5_000), rates + payments,
                              "converted")
    assert any(r.value[1] is None for r in expected) and \
        any(r.value[1] is not None for r in expected)
    assert as_multiset(got) == as_multiset(expected)


def test_a_time_limit_needs_the_rocksdb_state_store(default_state_store: Any,
                                                    tmp_path: Path) -> None:
    spark = default_state_store
    write_parquet(tmp_path / "in", [kafka_table(level_rows(seed=1, n=3))])
    with pytest.raises(ValueError, match="needs the RocksDB state store"):
        DistributedRunner(rate_limited_levels(),
                          sources={"levels": stream_of(spark, tmp_path / "in")},
                          sinks={"levels-limited": sinks.memory()},
                          checkpoint_dir=str(tmp_path / "chk"))


# -- refused when the runner is built -----------------------------------------------------------

def _late_records_topic() -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count(late_records_to="late")
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))
    return b.build()


def _filtered_counts() -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key().count().filter(lambda user, n: n > 1)
     .to_stream().to("out"))
    return b.build()


def _join_without_history() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates")
    b.stream("payments").join(rates, lambda p, r: p).to("out")
    return b.build()


def _versioned_table_read_twice() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 1_000))
    rates.to_stream().to("out")
    b.stream("payments").join(rates, lambda p, r: p).to("out")
    return b.build()


def _two_joins() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 1_000))
    payments = b.stream("payments")
    payments.join(rates, lambda p, r: p).to("out")
    payments.left_join(rates, lambda p, r: p).to("out")
    return b.build()


def _final_counts(stream: Any) -> Any:
    return (stream.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
            .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream())


def _window_beside_join() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 1_000))
    payments = b.stream("payments")
    _final_counts(payments).to("out")
    payments.join(rates, lambda p, r: p).to("out")
    return b.build()


def _window_fed_by_join_and_stream() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 1_000))
    payments = b.stream("payments")
    _final_counts(payments.join(rates, lambda p, r: p).merge(b.stream("refunds"))).to("out")
    return b.build()


def _join_after_window() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 1_000))
    _final_counts(b.stream("payments")).join(rates, lambda p, r: p).to("out")
    return b.build()


def _time_limit_and_window() -> Topology:
    b = StreamsBuilder()
    (b.table("levels").suppress(Suppressed.until_time_limit(50, BufferConfig.unbounded()))
     .to_stream().to("out"))
    _final_counts(b.stream("clicks")).to("out")
    return b.build()


def _idle_close() -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count().suppress(Suppressed.until_window_closes(BufferConfig.unbounded())
                       .with_idle_close(1_000))
     .to_stream().to("out"))
    return b.build()


def _two_aggregations() -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count().suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().map(lambda w, n: (n, w.key)).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))
    return b.build()


@pytest.mark.parametrize(("topology", "node", "why"), [
    (_filtered_counts, "KTABLE-FILTER-0000000003", "only to_stream()"),
    (_late_records_topic, "KSTREAM-AGGREGATE-0000000002", "late_records_to="),
    (_join_without_history, "KSTREAM-JOIN-0000000004", "only a join with a versioned table"),
    (_versioned_table_read_twice, "KTABLE-SOURCE-0000000001", "nothing else reading"),
    (_two_joins, "KSTREAM-LEFTJOIN-0000000005", "one stateful aggregation or join"),
    (_two_aggregations, "KSTREAM-AGGREGATE-0000000008", "one stateful aggregation"),
    (_window_beside_join, "KSTREAM-JOIN-0000000009", "one stateful aggregation or join"),
    (_window_fed_by_join_and_stream, "KSTREAM-AGGREGATE-0000000", "from elsewhere"),
    (_join_after_window, "KSTREAM-JOIN-0000000008", "one stateful aggregation or join"),
    (_time_limit_and_window, "KSTREAM-AGGREGATE-0000000", "one stateful aggregation"),
    (_idle_close, "KTABLE-SUPPRESS-0000000003", "idle close"),
], ids=["filter-after-count", "late-records-topic", "join-without-history",
        "versioned-table-read-twice", "two-joins",
        "two-aggregations", "window-beside-join",
        "window-fed-by-join-and-stream", "join-after-window", "time-limit-and-window",
        "idle-close"])
def test_unsupported_nodes_are_refused_by_name(topology: Any, node: str, why: str,
                                               tmp_path: Path) -> None:
    with pytest.raises(UnsupportedTopologyError) as refused:
        DistributedRunner(topology(), sources={}, sinks={"out": sinks.memory()},
                          checkpoint_dir=str(tmp_path))
    assert node in str(refused.value)
    assert why in str(refused.value)


def test_a_bad_column_mapping_is_refused_before_any_query(spark: Any, tmp_path: Path) -> None:
    write_parquet(tmp_path / "in", [kafka_table(click_rows(seed=1, n=3))])
    with pytest.raises(ColumnMappingError, match="no column 'user'"):
        DistributedRunner(final_counts(), sources={"clicks": stream_of(spark, tmp_path / "in")},
                          sinks={"counts": sinks.memory()}, checkpoint_dir=str(tmp_path / "c"),
                          columns=Columns(key="user"))
    assert not (tmp_path / "c").exists()


def test_a_static_source_is_refused_with_what_to_use(spark: Any, tmp_path: Path) -> None:
    static = kafka_df(spark, click_rows(seed=1, n=3))
    with pytest.raises(TypeError, match=r"sources\['clicks'\] must be a streaming DataFrame.*"
                                        r"got a static DataFrame.*ForeachBatchRunner"):
        DistributedRunner(final_counts(), sources={"clicks": static},
                          sinks={"counts": sinks.memory()}, checkpoint_dir=str(tmp_path / "c"))


def test_sources_and_sinks_must_match_the_topology(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"missing \['clicks'\]"):
        DistributedRunner(final_counts(), sources={}, sinks={"counts": sinks.memory()},
                          checkpoint_dir=str(tmp_path))
    with pytest.raises(ValueError, match="have no sink"):
        DistributedRunner(final_counts(), sources={"clicks": None}, sinks={},
                          checkpoint_dir=str(tmp_path))


def test_start_names_the_query_and_passes_writer_options(spark: Any, tmp_path: Path) -> None:
    """Stateless steps only (one mapInArrow per source and the sinks) over three files: the
    driver's records. The writer options reach Spark: async progress tracking, which Spark
    refuses for the runner's sink, fails the query; a checkpoint location is refused."""
    data = click_rows(seed=3)
    write_parquet(tmp_path / "in", [kafka_table(part) for part in batches(data, 3)])
    out = sinks.memory()
    runner = DistributedRunner(stateless_only(), sources={"clicks": stream_of(spark,
                                                                              tmp_path / "in")},
                               sinks={"pages": out}, checkpoint_dir=str(tmp_path / "chk"))
    with pytest.raises(ValueError, match="checkpoint_dir"):
        runner.start(options={"checkpointLocation": str(tmp_path / "other")})
    with pytest.raises(Exception, match="does not support async progress tracking"):
        runner.run_available("pages-of-clicks", {"asyncProgressTrackingEnabled": "true"})
    assert out.queue_size() == 0
    runner.run_available("pages-of-clicks", {"asyncProgressTrackingEnabled": "false"})
    assert runner.query.name == "pages-of-clicks"
    assert runner.query.lastProgress["name"] == "pages-of-clicks"
    expected = driver_records(stateless_only(), data, "pages")
    assert len(expected) > 5
    assert as_multiset(out.read_records_to_list()) == as_multiset(expected)
