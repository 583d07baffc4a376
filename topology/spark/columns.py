"""Which DataFrame columns hold a record's parts, and how a micro-batch becomes records.

:class:`Columns` names the columns. :func:`plan` checks a mapping against a DataFrame's Spark
schema before anything is read; :meth:`BatchPlan.decode_partitions` turns the Arrow table of
one micro-batch into ``(key, value, timestamp)`` tuples per input partition and topic, each
in the DataFrame's order.

Decoding is column-wise where Arrow can do it: binary columns read by the built-in
``Serdes.string()``, ``long()``, ``integer()``, ``double()`` or ``bytes()`` are converted a
column at a time (the same values and ``None`` for nulls as the serde gives); any other serde
is called once per cell, with the errors :func:`topology.serde.deserialize_from_topic` gives.
A column that holds bytes the fast path cannot read (invalid UTF-8, a long that is not 8
bytes) falls back to the per-cell calls, so the error is the serde's own, naming the topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TopologyError
from ..serde import Serde, Serdes, deserialize_from_topic

__all__ = ("BatchPlan", "ColumnMappingError", "Columns", "plan")

KAFKA_HEADERS_TYPE = "array<struct<key:string,value:binary>>"
"""Spark's type of the Kafka source's ``headers`` column (``includeHeaders=true``)."""
_TIMESTAMP_TYPES = {"timestamp": "micros", "timestamp_ntz": "micros", "bigint": "millis",
                    "int": "millis"}
"""Spark types a timestamp column may have, and the unit Arrow gives them in."""


class ColumnMappingError(TopologyError):
    """A column mapping that does not fit a micro-batch: raised before any record is processed.

    The message names the column, the type it has and the type it needs, and lists the
    DataFrame's columns with their Spark types.
    """


@final
@dataclass(frozen=True)
class Columns:
    """The DataFrame columns that hold each part of a record.

    The defaults are the names of Spark's Kafka source (``spark.readStream.format("kafka")``):
    binary ``key`` and ``value``, string ``topic``, ``timestamp`` and, with
    ``includeHeaders=true``, ``headers``.

    - ``key``, ``value``: a binary column is read by the serdes of the source's ``Consumed``
      (bytes as they are without one); a column of another Spark type arrives as its Python
      value (``str``, ``int``, ``float``, a ``dict`` for a struct, a ``list`` for an array).
      ``None``: no such column, every key (value) is ``None``.
    - ``timestamp``: a Spark ``timestamp`` (or ``timestamp_ntz``, read as UTC) or epoch
      milliseconds in a ``bigint``/``int`` column. Required; a null or negative timestamp
      refuses the micro-batch.
    - ``topic``: a string column naming each record's topic. It may be left out when the
      topology reads one topic: under its default name it is used only if present; ``None``
      ignores it.
    - ``headers``: Kafka's ``array<struct<key:string,value:binary>>``; under its default name
      used only if present; ``None`` ignores it.
    - ``partition``: an ``int``/``bigint`` column giving each record's input partition: each
      partition is one task, with its own stream time, stores and buffers (Kafka's task
      model). Under its default name used only if present; ``None`` ignores it (every record
      is of partition 0).

    A column named here that the DataFrame lacks, or that has a type the part cannot take, is
    a :class:`ColumnMappingError` raised before any record is processed.

    >>> Columns(key="account", value="amount", timestamp="ts_ms", partition=None)
    ... # doctest: +NORMALIZE_WHITESPACE
    Columns(key='account', value='amount', timestamp='ts_ms', topic='topic',
            headers='headers', partition=None)
    """

    key: str | None = "key"
    value: str | None = "value"
    timestamp: str = "timestamp"
    topic: str | None = "topic"
    headers: str | None = "headers"
    partition: str | None = "partition"

    def __post_init__(self) -> None:
        for part in ("key", "value", "timestamp", "topic", "headers", "partition"):
            name = getattr(self, part)
            if name is None and part != "timestamp":
                continue
            if not isinstance(name, str) or not name:
                raise TypeError(f"Columns({part}=...) must be a column name (a non-empty "
                                f"str){'' if part == 'timestamp' else ' or None'}, "
                                f"got {name!r}")


_DEFAULT = Columns()

Decoder = Callable[[pa.Array, str], list[Any]]
"""Turns a (binary) column of one topic's records into Python values."""


@dataclass(frozen=True)
class BatchPlan:
    """A column mapping checked against one schema: what to select and how to read it."""

    columns: Columns
    selected: tuple[str, ...]
    """The DataFrame columns to move to Python, in the order of ``roles``."""
    roles: tuple[str, ...]
    """Which part each selected column holds: ``key``, ``value``, ``timestamp``, ..."""
    binary: frozenset[str]
    """The parts (``key``/``value``) whose column is binary, read by the source's serdes."""
    timestamp_unit: str
    """``micros`` (a Spark timestamp) or ``millis`` (epoch ms)."""
    single_topic: str | None
    """The topology's only source topic, when the batch has no topic column."""

    def decode_partitions(self, table: pa.Table, topics: frozenset[str],
                          serdes: Mapping[str, tuple[Serde[Any] | None, Serde[Any] | None]]
                          ) -> dict[int, dict[str, list[tuple[Any, ...]]]]:
        """The micro-batch's records per partition, then per topic, each in its order.

        ``records`` are ``(key, value, timestamp)`` tuples, ``(key, value, timestamp,
        headers)`` for a record with headers. Without a partition column every record is of
        partition 0. Every record is checked and decoded before any is returned, so an error
        leaves nothing half-processed.

        :param topics: the source topics the topology reads.
        :param serdes: per topic, the source's ``Consumed`` key and value serdes.
        :raises ColumnMappingError: for a null or negative timestamp or partition, a null
            topic, or a topic the topology does not read (naming it and the row).
        :raises topology.SerdeError: for a key or value its serde cannot read.
        """
        if table.num_rows == 0:
            return {}
        names, codes, per_topic, partitions = self._per_topic(table, topics, serdes)
        if partitions is None:
            return {0: dict(zip(names, per_topic, strict=True))}
        out: dict[int, dict[str, list[tuple[Any, ...]]]] = {}
        for index, name in enumerate(names):
            rows = None if codes is None else np.flatnonzero(codes == index)
            of_topic = partitions if rows is None else partitions[rows]
            records = per_topic[index]
            for partition in np.unique(of_topic).tolist():
                picked = np.flatnonzero(of_topic == partition).tolist()
                out.setdefault(int(partition), {})[name] = (
                    records if len(picked) == len(records) else [records[i] for i in picked])
        return out

    def _per_topic(self, table: pa.Table, topics: frozenset[str],
                   serdes: Mapping[str, tuple[Serde[Any] | None, Serde[Any] | None]]
                   ) -> tuple[list[str], np.ndarray | None, list[list[tuple[Any, ...]]],
                              np.ndarray | None]:
        """What :meth:`decode_partitions` builds on.

        The topics' names, each row's topic index (``None``: one topic), the records of each
        topic in order, and each row's partition (``None``: no partition column).
        """
        col = {role: table.column(i).combine_chunks() for i, role in enumerate(self.roles)}
        millis = _millis(col["timestamp"], self.timestamp_unit, self.columns.timestamp)
        partitions = None
        if "partition" in col:
            partitions = _partitions(col["partition"], self.columns.partition)
        if "topic" in col:
            topic_col = col["topic"]
            if topic_col.null_count:
                row = _first_null(topic_col)
                raise ColumnMappingError(f"column {self.columns.topic!r} (the topic) is null "
                                         f"in row {row}: every record needs a topic")
            encoded = pc.dictionary_encode(topic_col)
            names = encoded.dictionary.to_pylist()
            codes = encoded.indices.to_numpy(zero_copy_only=False)
            for name in names:
                if name not in topics:
                    row = names.index(name)
                    row = int(np.flatnonzero(codes == row)[0])
                    raise ColumnMappingError(
                        f"row {row} is for topic {name!r}, which no source of the topology "
                        f"reads; it reads {sorted(topics)} (filter the DataFrame, or "
                        f"subscribe only to those topics)")
        else:
            assert self.single_topic is not None
            names, codes = [self.single_topic], None
        per_topic: list[list[tuple[Any, ...]]] = []
        for index, name in enumerate(names):
            rows = None if codes is None else np.flatnonzero(codes == index)
            per_topic.append(self._records(col, millis, rows, name, serdes.get(name)))
        return names, codes, per_topic, partitions

    def _records(self, col: dict[str, pa.Array], millis: np.ndarray, rows: np.ndarray | None,
                 topic: str, serdes: tuple[Serde[Any] | None, Serde[Any] | None] | None
                 ) -> list[tuple[Any, ...]]:
        """Records of one topic, in order: its rows of each column, decoded."""
        if rows is not None and len(rows) == len(millis):
            rows = None  # every row is this topic's
        take = (lambda a: a) if rows is None else (lambda a: a.take(pa.array(rows)))
        key_serde, value_serde = serdes or (None, None)
        parts = []
        for role, serde in (("key", key_serde), ("value", value_serde)):
            if role not in col:
                parts.append([None] * (len(millis) if rows is None else len(rows)))
            elif role in self.binary and serde is not None:
                parts.append(_decode(take(col[role]), serde, topic, role))
            else:
                parts.append(take(col[role]).to_pylist())
        times = (millis if rows is None else millis[rows]).tolist()
        records: list[tuple[Any, ...]] = list(zip(parts[0], parts[1], times, strict=True))
        if "headers" in col:
            headers = take(col["headers"])
            if headers.null_count < len(headers):
                lengths = pc.fill_null(pc.list_value_length(headers), 0).to_numpy()
                for i in np.flatnonzero(lengths).tolist():
                    pairs = tuple((h["key"], h["value"]) for h in headers[i].as_py())
                    records[i] = (*records[i], pairs)
        return records


def plan(columns: Columns | None, schema: Any, source_topics: Iterable[str]) -> BatchPlan:
    """Check ``columns`` against a Spark ``StructType``; what to select and how to read it.

    :param source_topics: the topics the topology reads (a topic column may be left out
        only when there is one).
    :raises ColumnMappingError: naming the column, its type and the types it may have, and
        listing the DataFrame's columns.
    """
    columns = columns or _DEFAULT
    found = {field.name: field.dataType.simpleString() for field in schema.fields}
    listing = ", ".join(f"{name} {kind}" for name, kind in found.items()) or "none"

    def refuse(message: str) -> ColumnMappingError:
        return ColumnMappingError(f"{message}. The DataFrame's columns: {listing}")

    topics = sorted(set(source_topics))
    selected: list[str] = []
    roles: list[str] = []
    binary: set[str] = set()
    for role in ("key", "value", "timestamp", "topic", "headers", "partition"):
        name = getattr(columns, role)
        if name is None:
            continue
        if name not in found:
            if role in ("topic", "headers", "partition") and name == getattr(_DEFAULT, role):
                continue  # Kafka's optional columns under their default names
            raise refuse(f"no column {name!r} for the record's {role} "
                         f"(Columns({role}={name!r}))")
        kind = found[name]
        if role == "timestamp" and kind not in _TIMESTAMP_TYPES:
            raise refuse(f"column {name!r} (the timestamp) has Spark type {kind}; a timestamp "
                         f"column must be a timestamp, or epoch milliseconds in a bigint or int")
        if role == "topic" and kind != "string":
            raise refuse(f"column {name!r} (the topic) has Spark type {kind}; it must be a "
                         f"string")
        if role == "partition" and kind not in ("int", "bigint", "smallint", "tinyint"):
            raise refuse(f"column {name!r} (the partition) has Spark type {kind}; it must be "
                         f"an int or bigint")
        if role == "headers" and kind != KAFKA_HEADERS_TYPE:
            raise refuse(f"column {name!r} (the headers) has Spark type {kind}; it must be "
                         f"{KAFKA_HEADERS_TYPE}")
        if role in ("key", "value") and kind == "binary":
            binary.add(role)
        selected.append(name)
        roles.append(role)
    single = None
    if "topic" not in roles:
        if len(topics) != 1:
            raise refuse(f"no topic column, and the topology reads {len(topics)} topics "
                         f"({topics}): name the column that says each record's topic "
                         f"(Columns(topic=...))")
        single = topics[0]
    return BatchPlan(columns, tuple(selected), tuple(roles), frozenset(binary),
                     _TIMESTAMP_TYPES[found[columns.timestamp]], single)


def _first_null(array: pa.Array) -> int:
    return int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])


def _partitions(column: pa.Array, name: str | None) -> np.ndarray:
    """The partition numbers (int64), checked: no nulls, none negative."""
    if column.null_count:
        raise ColumnMappingError(f"column {name!r} (the partition) is null in row "
                                 f"{_first_null(column)}: every record needs a partition")
    values = column.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if len(values) and values.min() < 0:
        row = int(np.flatnonzero(values < 0)[0])
        raise ColumnMappingError(f"column {name!r} (the partition) is {int(values[row])} in "
                                 f"row {row}: a partition number is never negative")
    return values


def _millis(column: pa.Array, unit: str, name: str) -> np.ndarray:
    """The timestamps as epoch ms (int64), checked: no nulls, none negative."""
    if column.null_count:
        raise ColumnMappingError(f"column {name!r} (the timestamp) is null in row "
                                 f"{_first_null(column)}: every record needs a timestamp")
    values = column.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if unit == "micros":
        values = values // 1000
    if len(values) and values.min() < 0:
        row = int(np.flatnonzero(values < 0)[0])
        raise ColumnMappingError(f"column {name!r} (the timestamp) is {int(values[row])} ms "
                                 f"in row {row}: a timestamp must not be negative (before "
                                 f"1970)")
    return values


# -- decoding binary columns -------------------------------------------------------------------

_FIXED_WIDTH: dict[int, tuple[int, str]] = {
    id(Serdes.long()): (8, ">i8"),
    id(Serdes.integer()): (4, ">i4"),
    id(Serdes.double()): (8, ">f8"),
}


def _decode(array: pa.Array, serde: Serde[Any], topic: str, part: str) -> list[Any]:
    """The values of a binary column read by ``serde``: column-wise for the built-ins."""
    if serde is Serdes.bytes():
        return array.to_pylist()
    if serde is Serdes.string():
        try:
            return pc.cast(array, pa.string()).to_pylist()
        except pa.ArrowInvalid:
            pass  # invalid UTF-8 somewhere: the serde names the cell below
    width = _FIXED_WIDTH.get(id(serde))
    if width is not None:
        values = _fixed_width(array, *width)
        if values is not None:
            return values
    deserialize = deserialize_from_topic
    return [deserialize(serde, data, topic, part) for data in array.to_pylist()]


def _fixed_width(array: pa.Array, width: int, dtype: str) -> list[Any] | None:
    """Big-endian numbers of ``width`` bytes each (``None`` kept).

    ``None`` if any cell has another length.
    """
    if pc.any(pc.not_equal(pc.binary_length(array), width)).as_py():
        return None
    nulls = array.null_count
    if nulls:
        mask = array.is_null().to_numpy(zero_copy_only=False)
        array = pc.fill_null(array, pa.scalar(b"\0" * width, array.type))
    if array.type != pa.binary():
        array = array.cast(pa.binary())
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    start = int(offsets[array.offset])
    data = array.buffers()[2]
    values: list[Any] = np.frombuffer(data, dtype=dtype, count=len(array),
                                      offset=start).tolist() if len(array) else []
    if nulls:
        for i in np.flatnonzero(mask).tolist():
            values[i] = None
    return values
