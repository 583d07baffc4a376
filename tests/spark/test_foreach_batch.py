"""ForeachBatchRunner on a real local SparkSession: same output as the driver, refusals, replay."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pyarrow as pa
import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.serde import SerdeError
from topology.spark import ColumnMappingError, Columns, ForeachBatchRunner, sinks

from .helpers import Row, batches, driver_output, kafka_df, out_of_order, task_order

S, L, D = Serdes.string(), Serdes.long(), Serdes.double()


def final_counts() -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(100, 20))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def final_window_counts(windows: Any) -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .group_by_key()
     .windowed_by(windows)
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def final_sliding_counts() -> Topology:
    return final_window_counts(SlidingWindows.of_time_difference_and_grace(80, 20))


def final_session_counts() -> Topology:
    return final_window_counts(SessionWindows.of_inactivity_gap_and_grace(30, 20))


def rate_limited_table() -> Topology:
    b = StreamsBuilder()
    (b.table("levels", Consumed(key_serde=S, value_serde=L))
     .suppress(Suppressed.until_time_limit(50, BufferConfig.max_records(3).emit_early_when_full()))
     .to_stream()
     .to("levels-limited"))
    return b.build()


def as_of_join() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=S, value_serde=D),
                    Materialized.versioned("rates-store", history_retention=500))
    (b.stream("payments", Consumed(key_serde=S, value_serde=Serdes.json()))
     .map(lambda pid, p: (p["currency"], (pid, p["amount"])))
     .join(rates, lambda p, rate: (p[0], round(p[1] * rate, 4)))
     .map(lambda currency, converted: converted)
     .to("converted", Produced(key_serde=S, value_serde=D)))
    return b.build()


def click_rows(seed: int, n: int = 600) -> list[Row]:
    rng = random.Random(seed)
    users = [f"user-{i}" for i in range(7)]
    return [("clicks", rng.choice(users).encode(), rng.choice(["/a", "/b"]).encode(), ts)
            for ts in out_of_order(rng, n, 3_000, 60)]


def level_rows(seed: int, n: int = 400) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for ts in out_of_order(rng, n, 2_000, 10):
        key = f"sensor-{rng.randrange(6)}".encode()
        value = None if rng.random() < 0.1 else L.serialize(rng.randrange(-50, 50))
        rows.append(("levels", key, value, ts))
    return rows


def payment_rows(seed: int, n: int = 300) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for i, ts in enumerate(out_of_order(rng, n, 5_000, 300)):
        currency = rng.choice(["USD", "GBP", "JPY"])
        if rng.random() < 0.3:
            rows.append(("rates", currency.encode(), D.serialize(rng.uniform(0.5, 1.5)), ts))
        else:
            payment = {"currency": currency, "amount": rng.randrange(1, 1000)}
            rows.append(("payments", f"p{i}".encode(), json.dumps(payment).encode(), ts))
    return rows


def run_batches(spark: Any, topology: Topology, rows: list[Row], topic: str, n: int,
                sink: Any, **kwargs: Any) -> ForeachBatchRunner:
    runner = ForeachBatchRunner(topology, sinks={topic: sink}, **kwargs)
    for batch_id, batch in enumerate(batches(rows, n)):
        runner(kafka_df(spark, batch), batch_id)
    return runner


# -- same records, same order: the memory sink holds what the driver's output topic holds ----

@pytest.mark.parametrize(("topology", "rows", "topic"), [
    (final_counts, click_rows, "counts"),
    (rate_limited_table, level_rows, "levels-limited"),
    (as_of_join, payment_rows, "converted"),
    (final_sliding_counts, click_rows, "counts"),
    (final_session_counts, click_rows, "counts"),
], ids=["final-results", "until-time-limit", "versioned-as-of-join", "sliding-final-results",
        "session-final-results"])
def test_memory_sink_holds_what_the_driver_outputs(spark: Any, topology: Any, rows: Any,
                                                   topic: str) -> None:
    data = rows(seed=7)
    expected = driver_output(topology(), task_order(data, 4), topic)
    assert len(expected) > 10
    sink = sinks.memory()
    with run_batches(spark, topology(), data, topic, 4, sink) as runner:
        assert runner.committed_batch_id == 3
        assert runner.last_progress is not None
        assert runner.last_progress.records_in == len(batches(data, 4)[-1])
        assert set(runner.last_progress.records_out) == {topic}
    assert sink.read_records_to_list() == expected


@pytest.mark.parametrize("topology", [final_sliding_counts, final_session_counts],
                         ids=["sliding", "session"])
def test_windows_restored_from_state_dir_between_batches(spark: Any, tmp_path: Any,
                                                         topology: Any) -> None:
    data = click_rows(seed=11)
    expected = driver_output(topology(), data, "counts")
    sink = sinks.memory()
    for batch_id, batch in enumerate(batches(data, 4)):
        with ForeachBatchRunner(topology(), state_dir=tmp_path, sinks={"counts": sink}) as runner:
            runner(kafka_df(spark, batch), batch_id)
    assert sink.read_records_to_list() == expected


def test_memory_sink_with_serdes_reads_the_produced_bytes(spark: Any) -> None:
    data = payment_rows(seed=3)
    expected = driver_output(as_of_join(), task_order(data, 3), "converted", Serdes.bytes(),
                             Serdes.bytes())
    sink = sinks.memory(Serdes.bytes(), Serdes.bytes())
    run_batches(spark, as_of_join(), data, "converted", 3, sink).close()
    assert sink.read_records_to_list() == expected
    assert isinstance(expected[0].value, bytes) and len(expected[0].value) == 8


def test_final_results_read_like_a_driver_topic(spark: Any) -> None:
    rows: list[Row] = [("clicks", b"a", b"x", 0), ("clicks", b"a", b"x", 50),
                       ("clicks", b"b", b"x", 90), ("clicks", b"a", b"x", 130)]
    sink = sinks.memory()
    run_batches(spark, final_counts(), rows, "counts", 2, sink).close()
    assert sink.queue_size() == 2
    assert sink.read_key_value() == (Windowed("a", Window(0, 100)), 2)
    assert sink.read_key_values_to_map() == {Windowed("b", Window(0, 100)): 1}
    assert sink.is_empty()


# -- the wall clock: read at the start of each micro-batch ------------------------------------

class _Clock:
    """A wall clock the test moves (ms)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


def test_idle_close_fires_at_the_start_of_a_micro_batch(spark: Any) -> None:
    """Windows of 100 ms, idle close after 1 s: the last window leaves in the first
    micro-batch that starts 1 s or more after the last record, before that batch's records."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S)).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(100)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_idle_close(1_000))
     .to_stream().to("counts"))
    calls: list[tuple[int, list[Any]]] = []
    clock = _Clock(1_700_000_000_000)
    with ForeachBatchRunner(b.build(), sinks={"counts": lambda records, batch_id: calls.append(
            (batch_id, [(str(r.key), r.value) for r in records]))}, clock=clock) as runner:
        runner(kafka_df(spark, [("clicks", b"a", b"x", 0), ("clicks", b"a", b"x", 50)]), 0)
        clock.now += 999
        runner(kafka_df(spark, []), 1)  # idle for 999 ms: nothing
        clock.now += 1
        runner(kafka_df(spark, [("clicks", b"a", b"x", 60)]), 2)  # idle 1 s: [0, 100) first
        runner(kafka_df(spark, [("clicks", b"b", b"x", 70)]), 3)  # late: the window went out
        metrics = runner.metrics()
    assert calls == [(0, []), (1, []), (2, [("[a@0/100]", 2)]), (3, [])]
    assert metrics["dropped-records-total"] == 2.0


# -- replay: a batch id at or below the committed one is skipped --------------------------------

def test_a_replayed_batch_is_skipped(spark: Any) -> None:
    calls: list[tuple[int, int]] = []

    def sink(records: list[TestRecord], batch_id: int) -> None:
        calls.append((batch_id, len(records)))

    rows = click_rows(seed=1, n=200)
    first, second = batches(rows, 2)
    with ForeachBatchRunner(final_counts(), sinks={"counts": sink}) as runner:
        runner(kafka_df(spark, first), 0)
        runner(kafka_df(spark, first), 0)  # re-delivered after a crash before Spark's commit
        assert runner.last_progress is not None and runner.last_progress.skipped
        runner(kafka_df(spark, second), 1)
        runner(kafka_df(spark, first), 1)
        assert [c[0] for c in calls] == [0, 1]
        assert runner.committed_batch_id == 1
    expected = driver_output(final_counts(), rows, "counts")
    assert sum(n for _, n in calls) == len(expected)


def test_an_error_after_processing_began_stops_the_runner(spark: Any) -> None:
    def failing(records: list[TestRecord], batch_id: int) -> None:
        raise OSError("disk full")

    rows = click_rows(seed=2, n=50)
    with ForeachBatchRunner(final_counts(), sinks={"counts": failing}) as runner:
        with pytest.raises(OSError, match="disk full"):
            runner(kafka_df(spark, rows), 0)
        assert runner.committed_batch_id is None
        with pytest.raises(RuntimeError, match="new ForeachBatchRunner on the same state_dir"):
            runner(kafka_df(spark, rows), 0)


# -- the column mapping is checked before any record is processed ------------------------------

def _never_called(records: list[TestRecord], batch_id: int) -> None:
    raise AssertionError("a refused batch reached a sink")


@pytest.mark.parametrize(("sql", "columns", "message"), [
    ("select cast('a' as binary) key, cast('v' as binary) value, 'ts' timestamp",
     None, r"column 'timestamp' \(the timestamp\) has Spark type string.*"
           r"columns: key binary, value binary, timestamp string"),
    ("select cast('a' as binary) key, cast('v' as binary) value, 5L ts",
     None, r"no column 'timestamp' for the record's timestamp"),
    ("select 'a' k, 5L ts", Columns(key="k", value="v", timestamp="ts"),
     r"no column 'v' for the record's value \(Columns\(value='v'\)\)"),
    ("select 'a' key, 'v' value, 5L timestamp, 3 topic", None,
     r"column 'topic' \(the topic\) has Spark type int; it must be a string"),
    ("select 'a' key, 'v' value, 5L timestamp, array(1) headers", None,
     r"column 'headers' \(the headers\) has Spark type array<int>"),
    ("select 'a' key, 'v' value, 5L timestamp", Columns(topic="src"),
     r"no column 'src' for the record's topic"),
    ("select 'a' key, 'v' value, cast(null as bigint) timestamp", None,
     r"column 'timestamp' \(the timestamp\) is null in row 0"),
    ("select 'a' key, 'v' value, -5L timestamp", None,
     r"is -5 ms in row 0: a timestamp must not be negative"),
    ("select 'a' key, 'v' value, 5L timestamp, 'other' topic", None,
     r"row 0 is for topic 'other', which no source of the topology reads; it reads \['clicks'\]"),
], ids=["timestamp-type", "no-timestamp", "no-value", "topic-type", "headers-type",
        "named-topic-missing", "null-timestamp", "negative-timestamp", "unknown-topic"])
def test_a_mapping_that_does_not_fit_is_refused(spark: Any, sql: str, columns: Any,
                                                message: str) -> None:
    calls: list[int] = []
    with ForeachBatchRunner(final_counts(), sinks={"counts": lambda r, b: calls.append(b)},
                            columns=columns) as runner:
        with pytest.raises(ColumnMappingError, match=message):
            runner(spark.sql(sql), 0)
        assert runner.committed_batch_id is None and calls == []
        assert runner.metrics()["dropped-records-total"] == 0
        if columns is None:
            runner(spark.sql("select 'a' key, 'v' value, 5L timestamp"), 0)  # still usable
            assert runner.committed_batch_id == 0 and calls == [0]


def test_several_source_topics_need_a_topic_column(spark: Any) -> None:
    with ForeachBatchRunner(as_of_join(), sinks={"converted": _never_called}) as runner:
        with pytest.raises(ColumnMappingError, match=r"no topic column, and the topology "
                                                     r"reads 2 topics \(\['payments', 'rates'\]"):
            runner(spark.sql("select cast('a' as binary) key, cast('v' as binary) value, "
                             "timestamp_millis(5) timestamp"), 0)


def test_bytes_a_serde_cannot_read_refuse_the_batch_before_processing(spark: Any) -> None:
    rows: list[Row] = [("levels", b"a", L.serialize(1), 0), ("levels", b"b", b"\x01", 1)]
    calls: list[int] = []
    with ForeachBatchRunner(rate_limited_table(),
                            sinks={"levels-limited": lambda r, b: calls.append(b)}) as runner:
        with pytest.raises(SerdeError, match=r"value of a record of topic 'levels'.*long"):
            runner(kafka_df(spark, rows), 0)
        assert runner.committed_batch_id is None and calls == []
        runner(kafka_df(spark, rows[:1]), 0)
        assert calls == [0]


def test_columns_of_other_spark_types_arrive_as_python_values(spark: Any) -> None:
    b = StreamsBuilder()
    b.stream("readings").map_values(lambda v: (v["celsius"], v["site"])).to("out")
    sink = sinks.memory()
    df = spark.sql("select 7L as sensor, named_struct('celsius', 21.5, 'site', 'north') as "
                   "reading, 1000L as ts_ms, array(named_struct('key', 'h', 'value', "
                   "cast('1' as binary))) as headers")
    columns = Columns(key="sensor", value="reading", timestamp="ts_ms")
    with ForeachBatchRunner(b.build(), sinks={"out": sink}, columns=columns) as runner:
        runner(df, 0)
    assert sink.read_records_to_list() == [TestRecord(7, (21.5, "north"), 1000,
                                                      [("h", b"1")])]


# -- data leaves Spark as Arrow, never row by row ----------------------------------------------

def test_data_leaves_spark_through_arrow_only(spark: Any, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    DataFrame = type(spark.range(1))  # the classic DataFrame class (pyspark.sql.classic)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("row-by-row transfer")

    for name in ("collect", "toLocalIterator", "toPandas", "take", "head", "first"):
        monkeypatch.setattr(DataFrame, name, forbidden)
    monkeypatch.setattr(DataFrame, "rdd", property(forbidden))
    arrow_calls: list[int] = []
    name = "toArrow" if hasattr(DataFrame, "toArrow") else "_collect_as_arrow"  # pyspark 3.5
    collect = getattr(DataFrame, name)
    monkeypatch.setattr(DataFrame, name, lambda self, *args, **kwargs:
                        arrow_calls.append(1) or collect(self, *args, **kwargs))
    rows = click_rows(seed=4, n=300)
    sink = sinks.memory()
    run_batches(spark, final_counts(), rows, "counts", 3, sink).close()
    assert arrow_calls == [1, 1, 1]
    assert sink.read_records_to_list() == driver_output(final_counts(), rows, "counts")


# -- construction ------------------------------------------------------------------------------

def test_every_output_topic_needs_a_sink_or_must_be_ignored() -> None:
    b = StreamsBuilder()
    s = b.stream("in")
    s.to("a")
    s.to("b")
    topology = b.build()
    with pytest.raises(ValueError, match=r"output topics \['b'\] have no sink.*ignore_topics"):
        ForeachBatchRunner(topology, sinks={"a": sinks.memory()})
    with pytest.raises(ValueError, match=r"writes no topic 'c'; it writes \['a', 'b'\]"):
        ForeachBatchRunner(topology, sinks={"a": sinks.memory(), "c": sinks.memory()},
                           ignore_topics=["b"])
    with pytest.raises(TypeError, match="must be callable"):
        ForeachBatchRunner(topology, sinks={"a": 3}, ignore_topics=["b"])  # type: ignore[dict-item]
    shared = sinks.memory()
    with pytest.raises(ValueError, match="give topic 'b' a sink of its own"):
        ForeachBatchRunner(topology, sinks={"a": shared, "b": shared})
    ForeachBatchRunner(topology, sinks={"a": sinks.memory()}, ignore_topics=["b"]).close()


def test_ignored_topics_are_dropped_on_purpose(spark: Any) -> None:
    b = StreamsBuilder()
    s = b.stream("in")
    s.to("kept")
    s.to("ignored")
    kept = sinks.memory()
    with ForeachBatchRunner(b.build(), sinks={"kept": kept}, ignore_topics="ignored") as runner:
        runner(spark.sql("select 'k' key, 'v' value, 3L timestamp"), 0)
        assert runner.last_progress is not None
        assert runner.last_progress.records_out == {"ignored": 1, "kept": 1}
    assert kept.read_key_value() == ("k", "v")


# -- a streaming query: files, availableNow, foreachBatch --------------------------------------

def test_a_streaming_query_from_files(spark: Any, tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    from .helpers import kafka_table

    rows = payment_rows(seed=11, n=600)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for i, batch in enumerate(batches(rows, 3)):
        staged = tmp_path / f"part-{i}.parquet"
        pq.write_table(kafka_table(batch), staged)
        os.utime(staged, (1_000_000 + i, 1_000_000 + i))  # the source reads by mtime
        staged.rename(incoming / staged.name)  # files appear whole
    schema = spark.read.parquet(str(incoming)).schema
    sink = sinks.memory()
    runner = ForeachBatchRunner(as_of_join(), state_dir=str(tmp_path / "state"),
                                sinks={"converted": sink})
    query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
             .parquet(str(incoming))
             .writeStream.foreachBatch(runner)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    runner.close()
    assert runner.committed_batch_id == 2
    # files are read in name order, each in its own micro-batch
    assert sink.read_records_to_list() == driver_output(as_of_join(), task_order(rows, 3),
                                                        "converted")


def test_string_and_long_serdes_decode_column_wise_with_nulls() -> None:
    from topology.spark.columns import _decode

    values = pa.array([L.serialize(5), None, L.serialize(-(2**63))], pa.binary())
    assert _decode(values, L, "t", "value") == [5, None, -(2**63)]
    assert _decode(values.slice(1), L, "t", "value") == [None, -(2**63)]
    doubles = pa.array([D.serialize(0.5), None], pa.binary())
    assert _decode(doubles, D, "t", "value") == [0.5, None]
    text = pa.array(["é".encode(), None], pa.binary())
    assert _decode(text, S, "t", "key") == ["é", None]
    with pytest.raises(SerdeError, match=r"key of a record of topic 't'"):
        _decode(pa.array([b"\xff"], pa.binary()), S, "t", "key")


def test_the_runner_matches_the_driver_piping_objects() -> None:
    """The reference used above (bytes through Consumed serdes) is the driver's own result."""
    rows = click_rows(seed=5, n=100)
    with TopologyTestDriver(final_counts()) as driver:
        clicks = driver.create_input_topic("clicks", S, S)
        for _, key, value, ts in rows:
            clicks.pipe_input(S.deserialize(key), S.deserialize(value), timestamp=ts)
        direct = driver.create_output_topic("counts").read_records_to_list()
    assert direct == driver_output(final_counts(), rows, "counts")


# -- restart from state_dir: a crash anywhere, then a new runner == one uninterrupted run -------

TRAP: dict[str, Any] = {"armed": False, "at": None}


def trapped_counts() -> Topology:
    """final_counts, with a peek that raises at one record while the trap is armed."""
    def peek(key: Any, value: Any) -> None:
        if TRAP["armed"] and (key, value) == TRAP["at"]:
            raise ValueError("the process dies here")

    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=S, value_serde=S))
     .peek(peek)
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(100, 20))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


@pytest.mark.parametrize("where", ["in-the-sink", "mid-batch"])
def test_a_crash_then_a_restart_on_the_same_state_dir_equals_one_run(spark: Any, tmp_path: Any,
                                                                      where: str) -> None:
    rows = [(t, k, f"v{i}".encode(), ts) for i, (t, k, _, ts) in enumerate(click_rows(seed=9))]
    parts = batches(rows, 4)
    frames = [kafka_df(spark, part) for part in parts]
    by_batch: dict[int, list[TestRecord]] = {}

    def overwrite(records: list[TestRecord], batch_id: int) -> None:
        by_batch[batch_id] = records  # a sink that writes per batch id

    def dies_after_batch_2(records: list[TestRecord], batch_id: int) -> None:
        overwrite(records, batch_id)
        if batch_id == 2 and where == "in-the-sink":
            raise SystemExit("killed after the sink, before the commit")

    state = tmp_path / "state"
    config = {"application_id": "crash"}
    _, key, value, _ = parts[2][len(parts[2]) // 2]
    TRAP.update(armed=where == "mid-batch", at=(key.decode(), value.decode()))
    try:
        first = ForeachBatchRunner(trapped_counts(), state_dir=state, config=config,
                                   sinks={"counts": dies_after_batch_2})
        with pytest.raises((SystemExit, ValueError)):
            for batch_id, df in enumerate(frames):
                first(df, batch_id)
        with pytest.raises(RuntimeError, match="restart with a new ForeachBatchRunner"):
            first(frames[2], 2)
    finally:
        TRAP["armed"] = False
    first.close()
    with ForeachBatchRunner(trapped_counts(), state_dir=state, config=config,
                            sinks={"counts": overwrite}) as second:
        assert second.committed_batch_id == 1
        skipped = []
        for batch_id in (1, 2, 3):  # a replay of the committed batch, then the uncommitted one
            second(frames[batch_id], batch_id)
            assert second.last_progress is not None
            skipped.append(second.last_progress.skipped)
        assert skipped == [True, False, False]
        assert second.committed_batch_id == 3
    replayed = [r for batch_id in sorted(by_batch) for r in by_batch[batch_id]]
    assert replayed == driver_output(trapped_counts(), rows, "counts")

