"""Micro-batches in Spark's Kafka source schema, and the driver's output for the same records."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from topology import Serdes, Topology, TopologyTestDriver
from topology.runtime.engine import merge_by_timestamp
from topology.spark._compat import frame_of

Row = tuple[str, bytes | None, bytes | None, int]
"""(topic, key bytes, value bytes, timestamp ms)"""

KAFKA_SOURCE = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")),
                          ("timestampType", pa.int32())])


def state_rows(spark: Any, checkpoint: Any, operator: int, variable: str) -> list[bytes]:
    """The user keys of a map state variable in the query's checkpoint, read through Spark's
    state data source: one entry per row of Spark's state store."""
    rows = (spark.read.format("statestore").option("operatorId", operator)
            .option("stateVarName", variable).load(str(checkpoint)).collect())
    return [row.user_map_key.key for row in rows]


def kafka_table(rows: Sequence[Row]) -> pa.Table:
    """The rows as Spark's Kafka source would give them (one partition)."""
    return pa.table({
        "key": pa.array([r[1] for r in rows], pa.binary()),
        "value": pa.array([r[2] for r in rows], pa.binary()),
        "topic": pa.array([r[0] for r in rows], pa.string()),
        "partition": pa.array([0] * len(rows), pa.int32()),
        "offset": pa.array(range(len(rows)), pa.int64()),
        "timestamp": pa.array([r[3] * 1000 for r in rows], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * len(rows), pa.int32()),
    }, schema=KAFKA_SOURCE)


def kafka_df(spark: Any, rows: Sequence[Row]) -> Any:
    return frame_of(spark, kafka_table(rows))


def driver_output(topology: Topology, rows: Iterable[Row], topic: str,
                  key_serde: Any = None, value_serde: Any = None) -> list[Any]:
    """What a driver's output topic holds after the rows were piped one by one as bytes."""
    with TopologyTestDriver(topology) as driver:
        pipe_rows(driver, rows)
        return driver.create_output_topic(topic, key_serde, value_serde).read_records_to_list()


def driver_run(topology: Topology, rows: Iterable[Row], topic: str = "out"
               ) -> tuple[list[tuple[Any, Any, int]], Counter[str]]:
    """The driver's records on ``topic`` as ``(key, value, timestamp)`` after the rows were
    piped one by one as bytes, and its drops by reason."""
    with TopologyTestDriver(topology) as driver:
        pipe_rows(driver, rows)
        records = driver.create_output_topic(topic).read_records_to_list()
        metrics = driver.metrics()
    prefix = "dropped-records-total{reason="
    drops = Counter({name[len(prefix):-1]: int(n) for name, n in metrics.items()
                     if name.startswith(prefix) and n})
    return [(r.key, r.value, r.timestamp) for r in records], drops


def pipe_rows(driver: TopologyTestDriver, rows: Iterable[Row]) -> None:
    """Pipe the rows one by one, as bytes, into the driver's input topics."""
    inputs: dict[str, Any] = {}
    for name, key, value, ts in rows:
        if name not in inputs:
            inputs[name] = driver.create_input_topic(name, Serdes.bytes(), Serdes.bytes())
        inputs[name].pipe_input(key, value, timestamp=ts)


def task_order(rows: Sequence[Row], n: int) -> list[Row]:
    """The rows as one task takes them in ``n`` micro-batches: each batch's topics merged
    lowest timestamp first (Kafka's PartitionGroup), each topic's rows in their order."""
    out: list[Row] = []
    for batch in batches(rows, n):
        by_topic: dict[str, list[tuple[Any, ...]]] = {}
        for row in batch:
            by_topic.setdefault(row[0], []).append((row[1], row[2], row[3]))
        for topic, records in merge_by_timestamp(by_topic):
            out.extend((topic, *record) for record in records)
    return out


def batches(rows: Sequence[Row], n: int) -> list[Sequence[Row]]:
    size = -(-len(rows) // n)
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def out_of_order(rng: random.Random, n: int, spread: int, jitter: int) -> list[int]:
    """n timestamps rising by about spread/n, each moved back by up to jitter ms."""
    return [max(0, i * spread // n - rng.randrange(jitter + 1)) for i in range(n)]
