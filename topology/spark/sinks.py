"""Where a :class:`~topology.spark.ForeachBatchRunner` hands each micro-batch's output records.

A sink is any callable ``sink(records, batch_id)``: ``records`` is the list of
:class:`~topology.TestRecord` that a driver output topic created without serdes returns for
that batch (the objects as the topology produced them, windowed keys as
:class:`~topology.Windowed`), in the order the topology wrote them. The runner calls every
sink once per micro-batch, with an empty list when the batch wrote nothing to its topic, and
commits only after every sink returned; a batch replayed after a crash between a sink and the
commit is handed the same records again, so a sink that overwrites per batch id stays exact.

Built-in sinks:

- :func:`memory`: keeps the records; read it exactly like a ``TestOutputTopic``.
- :func:`parquet`: one directory per batch id (``path/batch_id=<id>/``), written with pyarrow
  (by the executors under a ``DistributedRunner``) and replaced on replay.
- :func:`kafka_frame`: a Spark DataFrame in the Kafka sink's schema for ``fn(df, batch_id)``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from ..errors import IllegalStateError
from ..runtime.definitions import Sink as SinkDefinition
from ..runtime.outputs import OutputTopicReader, ReadBackChecks, TestRecord, read_back_checks
from ..serde import Serde, fallback_key_bytes, fallback_value_bytes, serializer_of
from ..topology import Topology
from ..windows import Windowed
from ._compat import frame_of

__all__ = ("KafkaFrameSink", "MemorySink", "ParquetSink", "Sink", "kafka_frame", "memory",
           "parquet")

Sink = Callable[[list[TestRecord], int], Any]
"""Any callable ``sink(records, batch_id)``."""

ProducedSerdes = tuple[Serde[Any] | None, Serde[Any] | None]


class _RunnerSink:
    """A built-in sink, told its topic and ``Produced`` serdes by the runner.

    The runner also hands it the micro-batch's Spark session when it writes.
    """

    topic: str | None = None
    _produced: ProducedSerdes = (None, None)

    def _bind(self, topic: str, produced: ProducedSerdes | None) -> None:
        """Attach to ``topic``, written with ``produced`` serdes (``None``: sinks disagree)."""
        if self.topic is not None and self.topic != topic:
            raise ValueError(f"this {type(self).__name__} already receives topic "
                             f"{self.topic!r}; give topic {topic!r} a sink of its own")
        self.topic = topic
        self._produced = (None, None) if produced is None else produced

    def _write(self, records: list[TestRecord], batch_id: int, spark: Any) -> None:
        cast(Sink, self)(records, batch_id)


class MemorySink(_RunnerSink, OutputTopicReader):
    """Records kept in memory and read like a driver's ``TestOutputTopic``.

    Without serdes, records come back as the topology produced them; with ``key_serde`` /
    ``value_serde``, deserialized from the bytes the topology's sink wrote (its ``Produced``
    serdes), exactly as a driver output topic created with those serdes. Reading is the
    driver's own code: ``read_value``, ``read_key_value``, ``read_record``,
    ``read_values_to_list``, ``read_key_values_to_list``, ``read_records_to_list``,
    ``read_key_values_to_map``, ``queue_size``, ``is_empty``.
    """

    __test__ = False

    def __init__(self, key_serde: Serde[Any] | None = None,
                 value_serde: Serde[Any] | None = None) -> None:
        OutputTopicReader.__init__(self, "<memory sink>", key_serde, value_serde)
        self._held: deque[tuple[Any, ...]] | None = None

    def _queue(self) -> deque[tuple[Any, ...]] | None:
        return self._held

    def _written_checks(self) -> ReadBackChecks | None:
        """:func:`read_back_checks` of the ``Produced`` serdes the records were written with."""
        return read_back_checks([self._produced], self._key_serde, self._value_serde)

    def _bind(self, topic: str, produced: ProducedSerdes | None) -> None:
        if produced is None and not self._plain:
            raise ValueError(f"the sinks writing topic {topic!r} use different Produced "
                             "serdes, so a memory sink with serdes cannot tell which bytes "
                             "each record had: read it without serdes")
        super()._bind(topic, produced)
        self.name = topic

    def __call__(self, records: list[TestRecord], batch_id: int) -> None:
        """Keep ``records`` (in the driver's held form) after those already kept."""
        held = self._held
        if held is None:
            held = self._held = deque()
        if self._plain:
            held.extend((r.key, r.value, r.timestamp, r.headers, None, None) for r in records)
            return
        key_serde, value_serde = self._produced
        for r in records:
            kb = None if key_serde is None else key_serde.serialize(r.key)
            vb = None if value_serde is None else value_serde.serialize(r.value)
            held.append((r.key, r.value, r.timestamp, r.headers, kb, vb))


def memory(key_serde: Serde[Any] | None = None,
           value_serde: Serde[Any] | None = None) -> MemorySink:
    """A sink that keeps records in memory, read like a ``TestOutputTopic`` (for tests).

    >>> from topology import TestRecord
    >>> sink = memory()
    >>> sink([TestRecord("a", 1, 5)], 0)
    >>> sink.read_key_value(), sink.is_empty()
    (('a', 1), True)
    """
    return MemorySink(key_serde, value_serde)


# -- parquet -----------------------------------------------------------------------------------

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_TIMESTAMP = pa.timestamp("ms", tz="UTC")


class ParquetSink(_RunnerSink):
    """Writes each micro-batch to ``path/batch_id=<id>/`` as Parquet files, with pyarrow.

    Columns: ``key`` and ``value`` as the Arrow types pyarrow infers from the objects (a
    :class:`~topology.Windowed` key as a struct of ``key``, ``start``, ``end``; a ``dict`` as a
    struct), or binary through ``key_serde`` / ``value_serde`` when given; ``timestamp``
    (milliseconds, UTC); ``headers`` (Kafka's list of ``key``/``value`` structs). A batch
    directory is written beside the others under a hidden name, then renamed into place
    (replacing the directory of a replayed batch), so readers never see half a batch, and a
    replay leaves exactly one copy. A batch without records leaves no directory.
    ``spark.read.parquet(path)`` reads every batch, with ``batch_id`` as a column.

    A ``ForeachBatchRunner`` writes one file per batch from the driver, where it runs the
    topology. A ``DistributedRunner`` has each Spark task write its own records as one file
    (:meth:`write_part`, on the executors), then the driver makes the files the batch
    (:meth:`commit`): ``path`` (made absolute when the sink is created) must then be a
    directory every node sees at the same place (a shared mount; on one machine any
    directory), the batch's records are spread over its files in no particular order, and
    the runner refuses a session with Spark's speculative execution on (``spark.speculation``,
    off by default): a losing attempt still writing when the batch is committed could leave
    its file there.
    """

    def __init__(self, path: str | os.PathLike[str], key_serde: Serde[Any] | None = None,
                 value_serde: Serde[Any] | None = None) -> None:
        self.path = Path(path).absolute()
        self._key_serde = key_serde
        self._value_serde = value_serde

    def __call__(self, records: list[TestRecord], batch_id: int) -> None:
        """Write ``records`` as batch ``batch_id``, replacing an earlier write of it.

        :raises TypeError: for keys or values that do not fit one Parquet column.
        """
        self.write_batch(batch_id, lambda staging: [self.write_part(records, staging)]
                         if records else [])

    def write_batch(self, batch_id: int,
                    write: Callable[[Path], Sequence[tuple[str, int]]]) -> int:
        """Stage batch ``batch_id``, have ``write(staging)`` write its files, and commit them.

        ``write`` returns the ``(name, count)`` of each file it wrote (:meth:`write_part`'s,
        here or on the executors). A failure leaves no staging directory behind. Returns the
        records written.

        :raises IllegalStateError: see :meth:`commit`.
        :raises TypeError: see :meth:`write_part` and :meth:`commit`.
        """
        staging = self.stage(batch_id)
        try:
            parts = write(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.commit(batch_id, staging, parts)

    def stage(self, batch_id: int) -> Path:
        """Create and return a new hidden directory for batch ``batch_id``'s files."""
        self.path.mkdir(parents=True, exist_ok=True)
        staging = self.path / f".batch_id={int(batch_id)}.{uuid.uuid4().hex}"
        staging.mkdir()
        return staging

    def write_part(self, records: list[TestRecord], staging: str | os.PathLike[str]
                   ) -> tuple[str, int]:
        """Write ``records`` as one new Parquet file in ``staging``: its name and row count.

        :raises TypeError: for keys or values that do not fit one Parquet column.
        :raises IllegalStateError: if ``staging`` is not there (an executor that does not
            share the driver's path).
        """
        import pyarrow.parquet as pq

        folder = Path(staging)
        if not folder.is_dir():  # on an executor: the driver made it on a disk of its own
            raise self._not_shared(f"finds no directory {folder} on this node")
        name = f"part-{uuid.uuid4().hex}.parquet"
        pq.write_table(self._table(records), folder / name)
        return name, len(records)

    def commit(self, batch_id: int, staging: Path, parts: Sequence[tuple[str, int]]) -> int:
        """Make the files ``parts`` (from :meth:`write_part`) in ``staging`` batch ``batch_id``.

        Files in ``staging`` that ``parts`` does not name (a failed task attempt's) are
        deleted. Files whose columns pyarrow inferred as other types than the rest of the
        batch (a task whose values were all ``None``, integers beside floats) are rewritten
        with the batch's common types. Then ``staging`` replaces the batch's directory, or
        with no records, the batch's directory is removed. Returns the records written.

        :raises IllegalStateError: if a named file is not in ``staging``: the path is not
            shared by the driver and the executors.
        :raises TypeError: for columns of the files that no common type holds.
        """
        names = {name for name, _ in parts}
        try:
            missing = sorted(name for name in names if not (staging / name).is_file())
            if missing:
                raise self._not_shared(f"does not see the files the executors wrote to "
                                       f"{staging} ({missing[0]} ...)")
            for leftover in staging.iterdir():
                if leftover.name not in names:
                    leftover.unlink()
            self._conform(staging, sorted(names))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        final = self.path / f"batch_id={int(batch_id)}"
        if final.exists():
            shutil.rmtree(final)
        if not names:
            shutil.rmtree(staging)
            return 0
        os.rename(staging, final)
        return sum(count for _, count in parts)

    def _not_shared(self, what: str) -> IllegalStateError:
        """The error for a path that the driver and the executors do not share."""
        return IllegalStateError(
            f"the parquet sink of topic {self.topic!r} {what}: its path must be a directory "
            "every node sees at the same place (a shared mount); or write with Spark from a "
            "kafka_frame sink")

    def _conform(self, staging: Path, names: list[str]) -> None:
        """Rewrite the files whose column types differ from the batch's common types."""
        if len(names) < 2:
            return
        import pyarrow.parquet as pq

        schemas = [pq.read_schema(staging / name) for name in names]
        try:
            common = pa.unify_schemas(schemas, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise self._mixed(schemas, exc) from exc
        for name, schema in zip(names, schemas, strict=True):
            if schema.equals(common):
                continue
            try:
                table = pq.ParquetFile(staging / name).read().cast(common)  # no partitions
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                raise self._mixed(schemas, exc) from exc
            pq.write_table(table, staging / name)

    def _mixed(self, schemas: list[pa.Schema], exc: Exception) -> TypeError:
        """The error for files whose key or value columns no common type holds."""
        for part in ("key", "value"):
            kinds = sorted({str(schema.field(part).type) for schema in schemas})
            if len(kinds) > 1:
                break
        return TypeError(
            f"the parquet sink of topic {self.topic or str(self.path)!r} got {part}s of Arrow "
            f"types {kinds} from different tasks, which one Parquet column cannot hold "
            f"({exc}); give it a {part} serde to store bytes: sinks.parquet(path, "
            f"{part}_serde=...)")

    def _table(self, records: list[TestRecord]) -> pa.Table:
        topic = self.topic or str(self.path)
        keys = [r.key for r in records]
        if self._key_serde is not None:
            key_col = pa.array([self._key_serde.serialize(k) for k in keys], pa.binary())
        elif any(type(k) is Windowed for k in keys):
            key_col = _column([None if k is None else
                               {"key": k.key, "start": k.window.start, "end": k.window.end}
                               for k in keys], "key", topic)
        else:
            key_col = _column(keys, "key", topic)
        values = [r.value for r in records]
        if self._value_serde is not None:
            value_col = pa.array([self._value_serde.serialize(v) for v in values],
                                 pa.binary())
        else:
            value_col = _column(values, "value", topic)
        return pa.table({
            "key": key_col,
            "value": value_col,
            "timestamp": pa.array([r.timestamp for r in records], _TIMESTAMP),
            "headers": _headers(records),
        })


def _column(objects: list[Any], part: str, topic: str) -> pa.Array:
    try:
        return pa.array(objects)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        kinds = sorted({type(o).__name__ for o in objects})
        raise TypeError(
            f"the parquet sink of topic {topic!r} cannot store {part}s of types {kinds} as "
            f"one Parquet column ({exc}); give it a {part} serde to store bytes: "
            f"sinks.parquet(path, {part}_serde=...)") from exc


def _headers(records: Sequence[TestRecord]) -> pa.Array:
    return pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records],
                    _HEADERS)


def parquet(path: str | os.PathLike[str], key_serde: Serde[Any] | None = None,
            value_serde: Serde[Any] | None = None) -> ParquetSink:
    """A sink writing one Parquet directory per batch id under ``path``.

    See :class:`ParquetSink`; replayed batches are overwritten, so replays are exact.
    """
    return ParquetSink(path, key_serde, value_serde)


# -- Kafka-shaped data frames ------------------------------------------------------------------

KAFKA_SINK_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()),
                               ("topic", pa.string()), ("timestamp", pa.timestamp("us",
                                                                                   tz="UTC")),
                               ("headers", _HEADERS)])
"""The Arrow schema of :func:`kafka_frame`'s DataFrames (Spark's Kafka sink columns)."""

KAFKA_SINK_DDL = ("key binary, value binary, topic string, timestamp timestamp, "
                  "headers array<struct<key: string, value: binary>>")
"""The same columns as Spark types (the schema of the ``DistributedRunner``'s frames)."""


def kafka_table(records: Sequence[TestRecord], topic: str | None,
                key_ser: Callable[[Any], bytes | None],
                value_ser: Callable[[Any], bytes | None]) -> pa.Table:
    """``records`` of ``topic`` as an Arrow table in :data:`KAFKA_SINK_SCHEMA`.

    Keys and values through ``key_ser`` / ``value_ser``; ``None`` stays null (a tombstone).
    """
    return pa.table({
        "key": pa.array([None if r.key is None else key_ser(r.key) for r in records],
                        pa.binary()),
        "value": pa.array([None if r.value is None else value_ser(r.value) for r in records],
                          pa.binary()),
        "topic": pa.array([topic] * len(records), pa.string()),
        "timestamp": pa.array([(r.timestamp or 0) * 1000 for r in records],
                              pa.int64()).cast(KAFKA_SINK_SCHEMA.field("timestamp").type),
        "headers": _headers(records),
    }, schema=KAFKA_SINK_SCHEMA)


class KafkaFrameSink(_RunnerSink):
    """Builds each micro-batch's records as a Spark DataFrame and calls ``fn(df, batch_id)``.

    The DataFrame has Spark's Kafka sink columns: binary ``key`` and ``value`` (through
    ``key_serde`` / ``value_serde``, by default the topology's ``Produced`` serdes for the
    topic, else the bytes of :func:`~topology.serde.fallback_key_bytes` /
    :func:`~topology.serde.fallback_value_bytes`; ``None`` stays null, a tombstone),
    ``topic``, ``timestamp`` and ``headers``. ``fn`` is called for every micro-batch, with an
    empty DataFrame when the batch wrote nothing to the topic. Spark's Kafka writer takes
    ``key``, ``value``, ``topic`` and ``headers`` (with ``includeHeaders``); the record
    timestamps are there for ``fn``'s own use, as Spark's writer does not set Kafka's from a
    column.
    """

    def __init__(self, fn: Callable[[Any, int], Any], key_serde: Serde[Any] | None = None,
                 value_serde: Serde[Any] | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"kafka_frame needs a function fn(df, batch_id), got {fn!r}")
        self.fn = fn
        self._key_serde = key_serde
        self._value_serde = value_serde

    def _bind(self, topic: str, produced: ProducedSerdes | None) -> None:
        if produced is None and (self._key_serde is None or self._value_serde is None):
            raise ValueError(f"the sinks writing topic {topic!r} use different Produced "
                             "serdes: give kafka_frame(fn, key_serde=..., value_serde=...)")
        super()._bind(topic, produced)

    def serializers(self) -> tuple[Callable[[Any], bytes | None],
                                   Callable[[Any], bytes | None]]:
        """The functions writing a record's key and value bytes (see the class docstring)."""
        return (serializer_of(self._key_serde or self._produced[0], fallback_key_bytes),
                serializer_of(self._value_serde or self._produced[1], fallback_value_bytes))

    def table(self, records: list[TestRecord]) -> pa.Table:
        """The records as an Arrow table in :data:`KAFKA_SINK_SCHEMA`."""
        return kafka_table(records, self.topic, *self.serializers())

    def _write(self, records: list[TestRecord], batch_id: int, spark: Any) -> None:
        self.fn(frame_of(spark, self.table(records)), batch_id)

    def __call__(self, records: list[TestRecord], batch_id: int) -> None:
        """Called outside a runner: uses the active Spark session."""
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise IllegalStateError("kafka_frame needs an active SparkSession")
        self._write(records, batch_id, spark)


def kafka_frame(fn: Callable[[Any, int], Any], key_serde: Serde[Any] | None = None,
                value_serde: Serde[Any] | None = None) -> KafkaFrameSink:
    """A sink calling ``fn(df, batch_id)`` with the batch's records as a Spark DataFrame.

    The DataFrame has Spark's Kafka sink schema (see :class:`KafkaFrameSink`), e.g. for
    ``df.write.format("kafka")...save()``.
    """
    return KafkaFrameSink(fn, key_serde, value_serde)


# -- what the runners share --------------------------------------------------------------------

def checked_sinks(topology: Topology, sinks: Mapping[str, Sink] | None,
                  ignore_topics: Iterable[str] = ()) -> dict[str, Sink]:
    """The sinks of a runner, checked against the topology's output topics and bound to them.

    Every output topic needs a sink or a place in ``ignore_topics``, so that no record a
    topology writes is dropped unless the caller said so; built-in sinks learn their topic
    and its ``Produced`` serdes.

    :raises TypeError: for a sink that is not callable.
    :raises ValueError: for a sink of a topic the topology does not write, a topic both with
        a sink and ignored, or an output topic with neither.
    """
    sinks = dict(sinks or {})
    ignored = frozenset([ignore_topics] if isinstance(ignore_topics, str) else ignore_topics)
    outputs = topology.sink_topics - topology.internal_topics
    for topic in sorted(set(sinks) | ignored):
        if topic not in outputs:
            raise ValueError(f"the topology writes no topic {topic!r}; it writes "
                             f"{sorted(outputs)}")
    both = sorted(set(sinks) & ignored)
    if both:
        raise ValueError(f"topics {both} have a sink and are in ignore_topics: choose one")
    missing = sorted(outputs - set(sinks) - ignored)
    if missing:
        raise ValueError(
            f"output topics {missing} have no sink: give each one in sinks={{topic: "
            f"sink}}, or list it in ignore_topics=[...] to drop its records")
    for topic, sink in sinks.items():
        if not callable(sink):
            raise TypeError(f"the sink of topic {topic!r} must be callable as "
                            f"sink(records, batch_id), got {sink!r}")
    produced = _produced_serdes(topology)
    for topic, sink in sinks.items():
        if isinstance(sink, _RunnerSink):
            sink._bind(topic, produced[topic])
    return sinks


def deliver(sink: Sink, records: list[TestRecord], batch_id: int, spark: Any) -> None:
    """Hand one micro-batch's records of a topic to its sink (``spark``: the batch's session)."""
    if isinstance(sink, _RunnerSink):
        sink._write(records, batch_id, spark)
    else:
        sink(records, batch_id)


def _produced_serdes(topology: Topology) -> dict[str, ProducedSerdes | None]:
    """Per output topic, the ``Produced`` serdes of the sinks writing it.

    ``None`` where two sinks write the topic with different serdes.
    """
    found: dict[str, ProducedSerdes | None] = {}
    for node in topology.nodes:
        definition = node.definition
        if not isinstance(definition, SinkDefinition):
            continue
        serdes: ProducedSerdes = (definition.key_serde, definition.value_serde)
        for topic in node.topics:
            if topic in found and found[topic] != serdes:
                found[topic] = None
            else:
                found.setdefault(topic, serdes)
    return found
