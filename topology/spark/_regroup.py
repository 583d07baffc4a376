"""A table's ``group_by`` as a batched ``transformWithStateInPandas`` processor.

A table aggregation (``b.table(topic).group_by(selector).count()``, ``reduce``,
``aggregate``) keeps two states keyed differently: the table's latest row per key, and the
aggregate per new key. In a task the re-grouped changes travel through a repartition topic
between the two; here they travel between two batched processors of one query. This one is
the first: the table's keys are grouped into :data:`BUCKETS` buckets by a hash of their
bytes, the records reach it packed (:func:`~topology.spark._stages.packed_frame`), and each
table row is a row of Spark's state store of its own, in the group's map state under its
key's bytes (the state codec's bytes, never pickle; see
:class:`~topology.spark._stages.FiledRows`): a call reads and writes only the rows of its
records' keys. Inside a call the topology's own table source (on the
in-memory store the driver uses) and ``group_by`` node turn each record, in arrival order,
into the subtraction of its old row's pair and the addition of its new row's pair (one
change when both have the same new key), as a task does. Those changes leave packed per
bucket of the aggregation (:mod:`topology.spark._aggregations`), each with the position
and the stream time of the record it came from, so that the aggregation handles them in
arrival order with the task's time. The selector's drops (a pair with a ``None`` key or
value) leave as :data:`~topology.spark._compile.DROPS` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress.entry import RecordContext

from ..record import Change
from ..runtime.processor import Entry
from ._compile import RegroupSpec
from ._stages import (
    BUCKETS,
    ROW_KEY,
    ROW_VALUE,
    BucketHost,
    FiledRows,
    bucket_of,
    changes_only,
    drop_counts,
    drop_frame,
    earlier_form,
    pack_rows,
    tick_rows,
    unpacked,
)

__all__ = ("BUCKETS", "Regrouping", "RegroupProcessor")

_EARLIER = StructType([StructField("rows", BinaryType())])
"""The value in which an earlier release kept a key group's table rows."""

Packed = tuple[Any, Any, int, Any, int, int, str, int, str]
"""A change as the aggregation's processor reads it: ``(key, Change, timestamp, headers,
seq, st, topic, mark, source)``, the last two ``(-1, "")``: the changes of every group
reach the aggregation in their rows' order, by ``seq`` (see
:func:`~topology.spark._stages.packed_frame`)."""


class Regrouping:
    """One call's work on one bucket of the table: its rows read, records in, changes out.

    :param rows: the group's map state of table rows by key (see
        :class:`~topology.spark._stages.FiledRows`).
    :param key_bytes: the aggregation's key serializer (the changes' buckets are by it).
    :param buckets: the aggregation's number of buckets.
    """

    def __init__(self, spec: RegroupSpec, rows: Any,
                 key_bytes: Callable[[Any], bytes | None], buckets: int) -> None:
        self._spec = spec
        self._key_bytes = key_bytes
        self._buckets = buckets
        self.host = host = BucketHost(spec.store, spec.store_factory)
        store = host.stores[spec.store]
        self._rows = FiledRows(store, spec.key_serializer, rows)
        self._changes: list[tuple[Any, Change, RecordContext]] = []
        table: Any = spec.table_factory()
        table.name = spec.table
        table.init(host)
        select: Any = spec.select_factory()
        select.name = spec.select
        select.init(host)
        changes = self._changes.append

        def change(key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
            changes((key, Change(new, old), ctx))

        select.connect([changes_only(change)])
        table.connect([Entry(select.record_entry(), select.change_entry(),
                             select.stale_entry())])
        self._table = table
        self.packs: dict[int, list[Packed]] = {}
        """The changes so far, by the aggregation's bucket."""

    def process(self, key: Any, value: Any, ctx: RecordContext, seq: int, st: int) -> None:
        """One table record: its changes join the packs, with its ``seq`` and ``st``."""
        self._rows.open(key)
        self._table.process(key, value, ctx)
        changes = self._changes
        topic = self._spec.topic
        for new_key, change, out in changes:
            self.packs.setdefault(bucket_of(self._key_bytes(new_key), self._buckets), []).append(
                (new_key, change, out[0], out[4], seq, st, topic, -1, ""))
        changes.clear()

    def save(self) -> None:
        """Write the rows the call changed (see :class:`~topology.spark._stages.FiledRows`)."""
        self._rows.save()


class RegroupProcessor(StatefulProcessor):
    """The table rows of one bucket of keys; emits the changes, packed, as a frame."""

    def __init__(self, spec: RegroupSpec, key_bytes: Callable[[Any], bytes | None],
                 buckets: int) -> None:
        self._spec = spec
        self._key_bytes = key_bytes
        self._buckets = buckets

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the bucket's rows; the value of an earlier release's rows is only checked."""
        self._earlier = handle.getValueState("rows", _EARLIER)
        self._rows = handle.getMapState("table", ROW_KEY, ROW_VALUE)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802
                        timerValues: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Regroup the group's records of the micro-batch, in arrival order.

        The changes go to the aggregation's groups of the one repartition partition (0),
        each with its record's position and partition time; the first group of each input
        partition passes that partition's ticks on to every group of the aggregation.
        """
        if self._earlier.exists():  # the table's rows as one value per key group
            raise earlier_form(self._spec.table)
        records, _, tops = unpacked(rows)
        regrouping = Regrouping(self._spec, self._rows, self._key_bytes, self._buckets)
        for k, v, ts, h, seq, st, topic in records:
            regrouping.process(k, v, RecordContext(ts, -1, topic, 0, h), seq, st)
        regrouping.save()
        if regrouping.packs:
            yield pack_rows(regrouping.packs, -1).to_pandas()
        if key[0] % BUCKETS == 0:  # the records go on under the repartition topic's name
            topic = self._spec.topic
            for chunk, top in sorted(tops.items()):
                yield tick_rows({0: {topic: max(top.values())}}, self._buckets,
                                chunk).to_pandas()
        drops = drop_counts(regrouping.host.metrics.as_dict(), {})
        if drops:  # sent on as drop rows, which the runner counts in its metrics
            yield drop_frame(drops).to_pandas()

    def close(self) -> None:
        """Nothing to release."""
