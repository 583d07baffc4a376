"""The built-in sinks: parquet (one directory per batch id, replaced on replay), kafka_frame."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from topology import Produced, Serdes, StreamsBuilder, TestRecord, Topology, Window, Windowed
from topology.errors import IllegalStateError
from topology.spark import ForeachBatchRunner, sinks
from topology.spark._compat import frame_of, to_arrow

from .test_foreach_batch import final_counts


def test_parquet_writes_a_directory_per_batch_and_replaces_it_on_replay(tmp_path: Path
                                                                        ) -> None:
    sink = sinks.parquet(tmp_path / "out")
    first = [TestRecord(Windowed("a", Window(0, 10)), 2, 7, [("h", b"1")])]
    sink(first, 0)
    sink([TestRecord(Windowed("b", Window(0, 10)), 5, 9)], 0)  # the batch, replayed
    sink([], 1)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["batch_id=0"]
    table = pq.read_table(tmp_path / "out" / "batch_id=0")
    assert table.to_pylist() == [{"key": {"key": "b", "start": 0, "end": 10}, "value": 5,
                                  "timestamp": table.column("timestamp")[0].as_py(),
                                  "headers": []}]
    assert table.column("timestamp").cast("int64").to_pylist() == [9]


def test_parquet_asks_for_a_serde_when_values_do_not_fit_a_column(tmp_path: Path) -> None:
    sink = sinks.parquet(tmp_path)
    with pytest.raises(TypeError, match=r"cannot store values of types \['int', 'str'\].*"
                                        r"value_serde"):
        sink([TestRecord("a", 1, 0), TestRecord("b", "x", 0)], 0)
    sinks.parquet(tmp_path, value_serde=Serdes.json())(
        [TestRecord("a", 1, 0), TestRecord("b", "x", 0)], 0)
    assert pq.read_table(tmp_path / "batch_id=0").column("value").to_pylist() == [b"1", b'"x"']


def test_parquet_commit_keeps_the_named_files_in_the_batchs_common_types(tmp_path: Path
                                                                          ) -> None:
    """What a DistributedRunner's tasks write: one file each, types inferred per task."""
    sink = sinks.parquet(tmp_path)
    staging = sink.stage(3)
    parts = [sink.write_part([TestRecord("a", None, 1)], staging),  # a null column
             sink.write_part([TestRecord("b", 1, 2)], staging),
             sink.write_part([TestRecord("c", 2.5, 3), TestRecord("d", 4, 4)], staging)]
    sink.write_part([TestRecord("x", 9, 9)], staging)  # a failed task attempt's file
    assert sink.commit(3, staging, parts) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch_id=3"]
    assert len(list((tmp_path / "batch_id=3").iterdir())) == 3
    table = pq.read_table(tmp_path / "batch_id=3")
    assert sorted(zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                      strict=True)) == [("a", None), ("b", 1.0), ("c", 2.5), ("d", 4.0)]
    assert str(table.schema.field("value").type) == "double"
    replay = sink.stage(3)
    assert sink.commit(3, replay, []) == 0  # the batch, replayed without records
    assert list(tmp_path.iterdir()) == []


def test_parquet_commit_refuses_files_no_column_holds(tmp_path: Path) -> None:
    sink = sinks.parquet(tmp_path)
    staging = sink.stage(0)
    parts = [sink.write_part([TestRecord("a", 1, 0)], staging),
             sink.write_part([TestRecord("b", "x", 0)], staging)]
    with pytest.raises(TypeError, match=r"values of Arrow types \['int64', 'string'\] from "
                                        r"different tasks.*value_serde"):
        sink.commit(0, staging, parts)
    assert list(tmp_path.iterdir()) == []


def test_parquet_commit_says_when_the_executors_files_are_elsewhere(tmp_path: Path) -> None:
    """A path that is not shared: a task wrote on its own node's disk."""
    sink = sinks.parquet(tmp_path)
    staging = sink.stage(0)
    with pytest.raises(IllegalStateError, match="every node sees at the same place"):
        sink.commit(0, staging, [("part-on-another-node.parquet", 5)])
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(IllegalStateError, match=r"finds no directory .* on this node"):
        sink.write_part([TestRecord("a", 1, 0)], staging)  # an executor's view of it


class _Conf:
    """A session's settings as ``spark.conf`` reads them back."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._values.get(key, default)


def test_parquet_sinks_need_speculative_execution_off(tmp_path: Path) -> None:
    """Checked when a DistributedRunner is built (speculation cannot change at runtime)."""
    from topology.spark.distributed import _check_parquet_sinks

    speculative = SimpleNamespace(conf=_Conf({"spark.speculation": "true"}))
    with pytest.raises(IllegalStateError, match=r"topics \['out'\].*spark.speculation=false"):
        _check_parquet_sinks(speculative, {"out": sinks.parquet(tmp_path)})
    _check_parquet_sinks(speculative, {"out": sinks.memory()})
    _check_parquet_sinks(SimpleNamespace(conf=_Conf({})), {"out": sinks.parquet(tmp_path)})


def test_parquet_output_reads_back_in_spark_with_the_batch_id(spark: Any, tmp_path: Path
                                                              ) -> None:
    out = tmp_path / "counts"
    rows = spark.sql("select 'a' key, 'x' value, t timestamp from values (0L), (150L), "
                     "(400L) as v(t)")
    with ForeachBatchRunner(final_counts(), sinks={"counts": sinks.parquet(out)}) as runner:
        runner(rows, 0)
    got = to_arrow(spark.read.parquet(str(out)).orderBy("timestamp")).to_pylist()
    assert [(r["key"], r["value"], r["batch_id"]) for r in got] == [
        ({"key": "a", "start": 0, "end": 100}, 1, 0),
        ({"key": "a", "start": 100, "end": 200}, 1, 0)]


def produced_topology() -> Topology:
    b = StreamsBuilder()
    (b.stream("in").map_values(lambda v: None if v == "delete" else len(v))
     .to("lengths", Produced(key_serde=Serdes.string(), value_serde=Serdes.long())))
    return b.build()


def test_kafka_frame_gives_spark_the_kafka_sink_schema(spark: Any) -> None:
    frames: list[tuple[Any, int]] = []
    sink = sinks.kafka_frame(lambda df, batch_id: frames.append((to_arrow(df), batch_id)))
    df = spark.sql("select 'k' key, v value, 1500L timestamp from values ('abc'), ('delete') "
                   "as t(v)")
    with ForeachBatchRunner(produced_topology(), sinks={"lengths": sink}) as runner:
        runner(df, 4)
        runner(df.limit(0), 5)
    (table, batch_id), (empty, empty_id) = frames
    assert batch_id == 4 and (empty.num_rows, empty_id) == (0, 5)
    assert str(frame_of(spark, table).schema.simpleString()) == (
        "struct<key:binary,value:binary,topic:string,timestamp:timestamp,"
        "headers:array<struct<key:string,value:binary>>>")
    rows = table.to_pylist()
    assert [(r["key"], r["value"], r["topic"]) for r in rows] == [
        (b"k", Serdes.long().serialize(3), "lengths"), (b"k", None, "lengths")]
    assert rows[0]["timestamp"].timestamp() == 1.5


def test_kafka_frame_without_produced_serdes_uses_the_fallback_bytes(spark: Any) -> None:
    frames: list[Any] = []
    with ForeachBatchRunner(final_counts(), sinks={"counts": sinks.kafka_frame(
            lambda df, batch_id: frames.append(to_arrow(df)))}) as runner:
        runner(spark.sql("select 'a' key, 'x' value, t timestamp from values (0L), (150L) "
                         "as v(t)"), 0)
    (row,) = frames[0].to_pylist()
    assert row["key"] == b"a" + (0).to_bytes(8, "big")  # Kafka's time-windowed key layout
    assert row["value"] == (1).to_bytes(8, "big")


def test_the_executors_frames_have_the_kafka_sink_schema() -> None:
    """The DistributedRunner's frames (a DDL string) and the driver's (Arrow) agree."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from topology.spark.sinks import KAFKA_SINK_DDL, KAFKA_SINK_SCHEMA

    fields = from_arrow_schema(KAFKA_SINK_SCHEMA).fields
    arrow = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in fields)
    assert arrow.replace(" ", "") == KAFKA_SINK_DDL.replace(" ", "")
