"""What the distributed runner runs inside Spark: stateless chains and packed records, on Arrow.

Between its Spark operators the runner moves rows in one Arrow layout, the *record frame*
(:data:`FRAME`): records to output topics, packs of records for a batched processor, a
processor's results and its drop counts. Keys, values and headers are the state codec's
bytes of the objects the topology produced (never pickle), written and read only by the
runner's own operators within one query, never taken from a topic.

:class:`Chain` runs stateless nodes with the library's own processors (the same code, and
errors, as a task); :func:`pre_stage` frames each chunk of a micro-batch for the stateful
node, packed per key group with its partitions' ticks (:func:`packed_frame`,
:func:`tick_rows`), which a batched processor reads back with the task's stream time
(:func:`unpacked`).
"""

from __future__ import annotations

import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress.entry import RecordContext

from ..errors import IllegalStateError
from ..runtime.engine import merge_by_timestamp
from ..runtime.metrics import DropReason, TaskMetrics
from ..runtime.processor import Entry, InternalProcessor
from ..runtime.processors.stateless import LONG_MAX, invalid_timestamp
from ..serde import Serde
from ..state.codec import decode, encode
from ._compile import AGGREGATION, DROPS, OUTPUTS, ChainSpec
from .columns import BatchPlan

__all__ = ("BUCKETS", "CHUNK_BITS", "DROP_REASONS", "FRAME", "MAX_SOURCES",
           "MAX_SPARK_PARTITIONS", "ROW_KEY", "ROW_VALUE", "BucketHost", "Chain", "FiledRows",
           "bucket_of", "buffered", "changes_only", "chunk_of", "drop_counts", "drop_frame",
           "earlier_form", "frame", "group", "load_state", "longs", "outputs_frame", "pack_rows",
           "packed_frame", "pre_stage", "rebuffer", "records_of_frame", "save_state", "tick_rows",
           "time_and_state", "timed_state", "unlongs", "unpacked")

BUCKETS = 8
"""Key buckets per input partition of a stateful step run in ``transformWithStateInPandas``
without a bound that spans its keys: keys by ``crc32(key bytes) % BUCKETS``; a bucket of one
partition is a key group (:func:`group`), and each call handles a group's records of a
micro-batch."""

FRAME = pa.schema([("route", pa.int32()), ("k", pa.binary()), ("v", pa.binary()),
                   ("ts", pa.int64()), ("h", pa.binary()), ("seq", pa.int64()),
                   ("st", pa.int64())])
"""The record frame: the Arrow layout of rows between the runner's operators.

A row is one of: a record to an output topic (its route, the key, value and headers as the
state codec's bytes, its timestamp; ``seq`` and ``st`` null); a pack of records for a
batched processor, or a tick (route :data:`~topology.spark._compile.AGGREGATION`, ``seq``
the key group, ``st`` the records; see :func:`packed_frame`); a processor's results in one
row (:data:`~topology.spark._compile.OUTPUTS`, see :func:`outputs_frame`); or its drops
(:data:`~topology.spark._compile.DROPS`, see :func:`drop_frame`)."""

DROP_REASONS = (DropReason.NULL_KEY, DropReason.NULL_VALUE, DropReason.OUT_OF_ORDER,
                DropReason.EXPIRED_VERSION, DropReason.EXPIRED_WINDOW)
"""The reasons a batched processor's drop rows may carry (the runner observes each)."""

_REASON_KEY = "dropped-records-total{reason="

Out = tuple[int, Any, Any, int, tuple[tuple[str, bytes | None], ...]]
"""A record leaving a chain: ``(route, key, value, timestamp, headers)``."""

_dumps = encode
_loads = decode


class Chain:
    """Stateless nodes wired as in a task; records leave through their routes.

    Built from a :class:`~topology.spark._compile.ChainSpec` on the executor (fresh
    processors per partition, so nothing is shared between tasks).
    """

    def __init__(self, spec: ChainSpec) -> None:
        self.out: list[Out] = []
        self.topics: list[str] = []
        """The context topic of each record in :attr:`out`."""
        procs: list[InternalProcessor] = []
        for name, factory, _ in spec.nodes:
            proc = factory()
            proc.name = name
            procs.append(proc)
        for proc, (_, _, kids) in zip(procs, spec.nodes, strict=True):
            entries = []
            for kid in kids:
                if isinstance(kid, int):
                    child = procs[kid]
                    entries.append(Entry(child.record_entry(), child.change_entry(),
                                         child.stale_entry()))
                else:
                    entries.append(self._exit(kid[1], kid[2]))
            proc.connect(entries)
        self._roots = {topic: [procs[i] for i in indices]
                       for topic, indices in spec.roots.items()}
        self.marks: list[tuple[int, Any]] = []
        """For the records in :attr:`out` that :meth:`feed` marked: the running maximum
        timestamp of their source's records read up to the one each came from, and that
        source (see :func:`_merge_order`)."""

    def _exit(self, route: int, sink: str) -> Entry:
        out = self.out.append
        topic = self.topics.append

        def record(key: Any, value: Any, ctx: RecordContext) -> None:
            ts = ctx[0]
            if route >= 0 and (type(ts) is not int or not 0 <= ts <= LONG_MAX):
                raise invalid_timestamp(sink, ts)
            out((route, key, value, ts, ctx[4]))
            topic(ctx[2])

        def change(key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
            record(key, new, ctx)

        return Entry(record, change, change)

    def roots(self, topic: str) -> list[InternalProcessor]:
        """The processors that receive ``topic``'s records (the post chain's: ``""``)."""
        return list(self._roots.get(topic, ()))

    def feed(self, topic: str, records: Iterable[tuple[Any, ...]], partition: int = 0,
             read: int = -1) -> int:
        """Pass ``(key, value, timestamp[, headers])`` records of ``topic`` through the chain.

        ``partition``: the input partition they are of (their contexts'). ``read``: the
        largest timestamp of the partition's records of ``topic`` read before these (-1:
        none). Each record leaving the chain is marked (:attr:`marks`) with that maximum up
        to the record it came from, which is returned, and its source ``(partition, topic)``.
        """
        roots = [p.record_entry() for p in self._roots.get(topic, ())]
        out, marks = self.out, self.marks
        top = read
        source = (partition, topic)
        for record in records:
            ctx = RecordContext(record[2], -1, topic, partition,
                                record[3] if len(record) > 3 else ())
            for entry in roots:
                entry(record[0], record[1], ctx)
            if record[2] > top:
                top = record[2]
            if len(out) > len(marks):
                marks += [(top, source)] * (len(out) - len(marks))
        return top

    def feed_change(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Pass one table update (new ``value``, no old one) to the roots' change entries."""
        for roots in self._roots.values():
            for proc in roots:
                proc.change_entry()(key, value, None, ctx)

    def take(self) -> list[Out]:
        """The records that left the chain since the last call."""
        return self.take_with_topics()[0]

    def take_with_topics(self) -> tuple[list[Out], list[str]]:
        """The records that left the chain since the last call, and their context topics."""
        out, topics = list(self.out), list(self.topics)
        self.out.clear()
        self.topics.clear()
        self.marks.clear()
        return out, topics

    def take_marked(self) -> tuple[list[Out], list[str], list[tuple[int, Any]]]:
        """:meth:`take_with_topics`, and the records' :attr:`marks`."""
        marks = list(self.marks)
        out, topics = self.take_with_topics()
        return out, topics, marks


def frame(records: list[Out]) -> pa.RecordBatch:
    """Records to output topics as a record-frame batch (see :data:`FRAME`)."""
    n = len(records)
    return pa.RecordBatch.from_arrays([
        pa.array([r[0] for r in records], pa.int32()),
        pa.array([_dumps(r[1]) for r in records], pa.binary()),
        pa.array([_dumps(r[2]) for r in records], pa.binary()),
        pa.array([r[3] for r in records], pa.int64()),
        pa.array([_dumps(r[4]) if r[4] else None for r in records], pa.binary()),
        pa.nulls(n, pa.int64()),
        pa.nulls(n, pa.int64()),
    ], schema=FRAME)


class BucketHost:
    """What the library's processors in a batched processor read of their task.

    The store (built fresh by ``store_factory``, named ``store``) and the counters: drops
    (null keys or values, closed windows, rejected writes) are counted in :attr:`metrics` and
    logged on the executor, as a task logs them; the processor sends the counts on as drop
    rows. A suppression node reads :attr:`debug_metrics`, :attr:`durable` and
    :meth:`register_suppression` of its task: here they say the group has no debug metrics,
    no state directory and no stores but the one above.
    """

    debug_metrics = False
    """No debug metrics sampled per update (as a task without ``debug_metrics``)."""
    durable = False
    """No state directory: the state goes into Spark's state store, written by the call."""

    def __init__(self, store: str, store_factory: Callable[[], Any]) -> None:
        self.stores = {store: store_factory()}
        self.metrics = TaskMetrics()

    def register_suppression(self, name: str, view: Any, metrics: Any,
                             store_name: str | None) -> None:
        """A suppression's buffer is not a store here: the call writes its entries itself."""


ROW_KEY = StructType([StructField("key", BinaryType())])
"""The user key schema of a group's rows in Spark's state store: the key's bytes."""

ROW_VALUE = StructType([StructField("row", BinaryType())])
"""The value schema of a group's rows in Spark's state store: the state codec's bytes."""


class FiledRows:
    """A key group's key-value rows ``(key, value, timestamp)``, a row of Spark's state per key.

    Each row lives in ``rows``, the group's map state (``StatefulProcessorHandle.getMapState``
    with :data:`ROW_KEY` and :data:`ROW_VALUE`): one entry of Spark's state store per key,
    under the key's bytes (by ``key_bytes``, the store's key serializer), holding the state
    codec's bytes of the row. A row goes into ``store`` when :meth:`open` is first called
    with its key in the call, before the call's first record of the key is processed;
    :meth:`save` writes back only the rows that changed, and removes those the store no
    longer holds. So a call reads and writes the rows its records name, whatever the number
    of keys the group holds. (The rows of a group share its grouping key, so they live in
    the state store partition of the group.)
    """

    def __init__(self, store: Any, key_bytes: Callable[[Any], bytes | None], rows: Any
                 ) -> None:
        self._store = store
        self._key_bytes = key_bytes
        self._rows = rows
        self._opened: dict[bytes, tuple[Any, bytes | None]] = {}

    def open(self, key: Any) -> None:
        """Put ``key``'s row into the store, the first time the call names the key."""
        if key is None:
            return
        kb = self._key_bytes(key)
        if kb is None or kb in self._opened:
            return
        held = self._rows.getValue((kb,))
        row = None if held is None else held[0]
        self._opened[kb] = (key, row)
        if row is not None:
            stored_key, value, ts = _loads(row)
            self._store.put_with_timestamp(stored_key, value, ts)

    def save(self) -> None:
        """Write the opened keys' rows as the store now holds them; unchanged ones are kept."""
        rows, store = self._rows, self._store
        for kb, (key, before) in self._opened.items():
            kept = store.get_with_timestamp(key)
            if kept is None:
                if before is not None:
                    rows.removeKey((kb,))
                continue
            row = _dumps((key, kept[0], kept[1]))
            if row != before:
                rows.updateValue((kb,), (row,))
        self._opened = {}


def changes_only(change: Callable[[Any, Any, Any, RecordContext], None]) -> Entry:
    """The entry of a node that takes only changes, for a processor that forwards changes.

    ``change`` takes changes and stale ones; a record reaching the entry raises ``TypeError``.
    """
    return Entry(_no_record, change, change)


def _no_record(key: Any, value: Any, ctx: RecordContext) -> None:
    raise TypeError("a processor that forwards changes forwarded a record")


def buffered(buffer: Any) -> tuple[Any, ...] | None:
    """A suppression buffer's entries by column, as a group's state keeps them; ``None``: empty.

    The columns are the buffer times, the keys, the latest changes' new and old values, the
    prior values, then the contexts': timestamps, offsets, partitions, topics (their distinct
    names and each entry's index into them) and headers (``None`` when every entry's are
    ``()``). Numbers are int64 arrays (:func:`longs`; buffer times beyond int64 a tuple, see
    :func:`_times`), so the state codec writes an entry's key and three values, not two
    tuples of them with its time and context.
    """
    entries = list(buffer)
    if not entries:
        return None
    contexts = [e.context for e in entries]
    topics = [c[2] for c in contexts]
    names = tuple(dict.fromkeys(topics))
    return (_times([e.time for e in entries]), tuple(e.key for e in entries),
            tuple(e.new for e in entries), tuple(e.old for e in entries),
            tuple(e.prior for e in entries), longs([c[0] for c in contexts]),
            longs([c[1] for c in contexts]), longs([c[3] for c in contexts]), names,
            _indices(topics, names), _headers_column(tuple(c[4] for c in contexts)))


def rebuffer(buffer: Any, kept: Any) -> None:
    """Put entries that :func:`buffered` gave back into a fresh buffer, in their order.

    ``kept`` is :func:`buffered`'s columns, or (a state value of the previous form, see
    :func:`time_and_state`) a list of ``(time, key, new, old, prior, context)`` rows; a time
    limit's rows written before old values were kept have no ``old`` (it was ``None``, as its
    prior), and read back with ``old = prior``. Each entry gets its buffer time, prior value
    and latest change back (so its size too).
    """
    if kept is None:
        return
    if isinstance(kept, list):
        rows: Iterable[tuple[Any, ...]] = (
            (r[0], r[1], r[2], r[3], r[3], r[4]) if len(r) == 5 else r for r in kept)
    else:
        times, keys, news, olds, priors, stamps, offsets, partitions, names, topics, \
            headers = kept
        rows = zip(_untimes(times), keys, news, olds, priors,
                   zip(unlongs(stamps), unlongs(offsets), _named(topics, names),
                       unlongs(partitions), _headers_of(headers, len(keys)), strict=True),
                   strict=True)
    put = buffer.put
    for time, key, new, old, prior, ctx in rows:
        context = RecordContext(*ctx)
        put(time, key, new, prior, context)  # a new entry: its prior
        put(time, key, new, old, context)  # then its latest change


def save_state(state: Any, data: bytes | None) -> None:
    """Replace a group's one state value (``None``: clear it).

    ``state`` is the processor's value state of one binary field.
    """
    if data is None:
        state.clear()
    else:
        state.update((data,))


def load_state(state: Any) -> bytes | None:
    """A group's one state value (``None``: none kept)."""
    held = state.get()
    return None if held is None else held[0]


_STATE_FORM = "per-partition-5"
"""Marks a group's state value as this release's: a stream time per input partition, and the
aggregates without windows, table rows and join histories in rows of their own, the join's
keys grouped as the other steps' are; buffers and windows by column (:func:`buffered`)."""

_PREVIOUS_FORM = "per-partition-4"
"""The form before, which kept buffers and windows as lists of rows: read as this form's
(:func:`rebuffer` and the aggregation's windows take either)."""


def timed_state(stream_time: int, kept: Any) -> bytes:
    """A key group's state value: its partition's stream time (ms) and what it keeps."""
    return _dumps((_STATE_FORM, stream_time, kept))


def time_and_state(state: bytes | None, node: str) -> tuple[int, Any]:
    """The stream time (ms; -1 for none) and what a group keeps, from :func:`timed_state`.

    A value of the previous form (:data:`_PREVIOUS_FORM`) is read too: what it keeps differs
    only in the buffers' and windows' layout, which their readers take in either form.

    :raises IllegalStateError: for a state value in an earlier release's form (one that kept
        the keys of every input partition together, or the aggregates without windows or
        the join's histories in the group's value): read as this release's, keys would be
        lost.
    """
    if state is None:
        return -1, None
    value = _loads(state)
    if not (isinstance(value, tuple) and len(value) == 3
            and value[0] in (_STATE_FORM, _PREVIOUS_FORM)):
        raise earlier_form(node)
    return value[1], value[2]


def earlier_form(node: str) -> IllegalStateError:
    """The error for a key group's state that ``node`` finds in an earlier release's form."""
    return IllegalStateError(
        f"{node}: the query's checkpoint holds state in an earlier release's form, which "
        f"this release cannot read. Run the query on a new checkpoint_dir (it reads its "
        f"input again)")


def drop_counts(metrics: Mapping[str, float], before: Mapping[str, float]) -> dict[str, int]:
    """Drops by reason in ``metrics`` (``TaskMetrics.as_dict()``) that ``before`` lacked."""
    out = {}
    for name, value in metrics.items():
        if name.startswith(_REASON_KEY):
            n = int(value - before.get(name, 0.0))
            if n:
                out[name[len(_REASON_KEY):-1]] = n
    return out


def drop_frame(drops: Mapping[str, int]) -> pa.RecordBatch:
    """Drop counts as record-frame rows of route :data:`~topology.spark._compile.DROPS`.

    :raises ValueError: for a reason outside :data:`DROP_REASONS` (the runner would not see
        it).
    """
    unknown = sorted(set(drops) - set(DROP_REASONS))
    if unknown:
        raise ValueError(f"drop reasons {unknown} are not among {DROP_REASONS}: the runner "
                         f"would not count them")
    reasons = sorted(drops)
    n = len(reasons)
    return pa.RecordBatch.from_arrays([
        pa.array([DROPS] * n, pa.int32()),
        pa.array([r.encode() for r in reasons], pa.binary()),
        pa.nulls(n, pa.binary()),
        pa.array([drops[r] for r in reasons], pa.int64()),
        pa.nulls(n, pa.binary()),
        pa.array([0] * n, pa.int64()),
        pa.array([-1] * n, pa.int64()),
    ], schema=FRAME)


CHUNK_BITS = 36
"""A record's ``seq`` is ``chunk << CHUNK_BITS`` plus its position in its chunk: the
micro-batch's records a ``mapInArrow`` task read (its source DataFrame's index, then
Spark's partition id; see :func:`chunk_of`)."""


MAX_SOURCES = 1 << 7
MAX_SPARK_PARTITIONS = 1 << 20
"""The source DataFrames and the Spark partitions of one that :func:`chunk_of` numbers."""


def chunk_of(source: int, partition_id: int) -> int:
    """The chunk of a source DataFrame's Spark partition: chunks sort as a task takes them.

    Chunks of one micro-batch are taken source by source, each source's in Spark's
    partition order (the order ``foreachBatch`` collects them in).

    :raises ValueError: for a source index or Spark partition id beyond
        :data:`MAX_SOURCES` or :data:`MAX_SPARK_PARTITIONS`.
    """
    if not (0 <= source < MAX_SOURCES and 0 <= partition_id < MAX_SPARK_PARTITIONS):
        raise ValueError(f"source {source} (at most {MAX_SOURCES - 1}) or Spark partition "
                         f"{partition_id} (at most {MAX_SPARK_PARTITIONS - 1}) out of range: "
                         f"repartition the input into fewer Spark partitions")
    return (source << 20) | partition_id


def packed_frame(records: list[Out], key_bytes: Callable[[Any], bytes | None],
                 first_seq: int, partition: int, seen: int, buckets: int, chunk: int,
                 topics: list[str], tops: dict[str, int] | None = None,
                 drops_null_values: bool = False, keeps_null_keys: bool = False,
                 marks: list[tuple[int, Any]] | None = None) -> tuple[pa.RecordBatch, int]:
    """:func:`frame`, but the records routed to the stateful node packed per key group.

    A record to an output topic is a row as in :func:`frame`. The records to the stateful
    node, all of input ``partition``, become one row per group ``partition * buckets +
    crc32(key bytes) % buckets`` (:func:`group`): route
    :data:`~topology.spark._compile.AGGREGATION`, ``k`` the codec's bytes of ``(chunk, None,
    columns, None)``, the records ``(key, value, timestamp, headers, seq, st, topic, mark,
    source)`` by column (:func:`_columns`; ``seq`` from ``first_seq`` on; ``st`` the largest
    timestamp routed there before it in the chunk and partition, from ``seen`` on;
    ``topics``: each record's context topic; ``mark`` and ``source`` from ``marks``, one per
    record, see :attr:`Chain.marks`; none given: records already in their task's order,
    ``(-1, "")``), ``ts`` their largest timestamp,
    ``seq`` the group and ``st`` their number; those with a ``None`` key are dropped and
    counted in a :func:`drop_frame` row. So Spark moves, sorts and converts one row per
    group instead of one per record. Returns the batch and the largest timestamp routed to
    the stateful node so far; ``tops`` (the chunk's, per topic, for :func:`tick_rows`) is
    raised in place. A record the node drops before it moves its stream time (a ``None``
    key; with ``drops_null_values``, a stream aggregation's, a ``None`` value too) moves
    neither. With ``keeps_null_keys`` (the as-of join, whose left join joins a ``None`` key
    and whose other parts drop and count it themselves), such a record goes to the
    partition's bucket 0 and moves both.
    """
    rows: list[Out] = []
    packs: dict[int, list[tuple[Any, ...]]] = {}
    null_keys = 0
    base = partition * buckets
    if marks is None:
        marks = [(-1, "")] * len(records)
    for seq, (record, topic, (mark, source)) in enumerate(
            zip(records, topics, marks, strict=True), first_seq):
        route, key, value, ts, headers = record
        if route >= 0:
            rows.append(record)
            continue
        kb = None if key is None else key_bytes(key)
        if kb is None and not keeps_null_keys:
            null_keys += 1
            continue
        packs.setdefault(base + bucket_of(kb, buckets), []).append(
            (key, value, ts, headers, seq, seen, topic, mark, source))
        if value is None and drops_null_values:
            continue
        if ts > seen:
            seen = ts
        if tops is not None and ts > tops.get(topic, -1):
            tops[topic] = ts
    batch = frame(rows)
    parts = [batch]
    if packs:
        parts.append(pack_rows(packs, chunk))
    if null_keys:
        parts.append(drop_frame({DropReason.NULL_KEY: null_keys}))
    if len(parts) == 1:
        return batch, seen
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0], seen


def group(partition: int, bucket: int, buckets: int) -> int:
    """The key group of ``bucket`` (of ``buckets``) in input ``partition``."""
    return partition * buckets + bucket


def bucket_of(key_bytes: bytes | None, buckets: int) -> int:
    """The bucket (of ``buckets``) of a key by its bytes: ``crc32 % buckets``; 0 for ``None``."""
    return 0 if key_bytes is None else zlib.crc32(key_bytes) % buckets


def pack_rows(packs: Mapping[int, list[tuple[Any, ...]]], chunk: int) -> pa.RecordBatch:
    """Packs of records as record-frame rows, one per group (see :func:`packed_frame`).

    ``packs`` maps a group to its records (not empty), each a tuple whose third item is its
    timestamp; ``chunk`` is theirs. A row's ``k`` is the codec's bytes of ``(chunk, None,
    columns, None)`` (:func:`_columns`); a tick's (:func:`tick_rows`) of ``(chunk, top,
    None, read)``.
    """
    order = sorted(packs)
    return _pack_batch([(g, _dumps((chunk, None, _columns(packs[g]), None)),
                         max(r[2] for r in packs[g]), len(packs[g])) for g in order])


def _columns(records: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """A pack's records by column.

    The records are ``(key, value, timestamp, headers, seq, st, topic, mark, source)``. The
    four numbers are little-endian int64 arrays; the topics and sources are indices into
    their distinct names; the headers are ``None`` when every record's are ``()``.
    So the state codec writes two objects per record (key and value; three with headers),
    not nine. ``records`` is not empty; the numbers fit int64 (timestamps, positions).
    """
    keys, values, stamps, headers, seqs, sts, topics, marks, sources = zip(*records,
                                                                           strict=True)
    names = tuple(dict.fromkeys(topics + sources))
    return (keys, values, longs(stamps), _headers_column(headers), longs(seqs),
            longs(sts), names, _indices(topics, names), longs(marks), _indices(sources, names))


def _records(columns: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The records of :func:`_columns`."""
    keys, values, stamps, headers, seqs, sts, names, topics, marks, sources = columns
    return list(zip(keys, values, unlongs(stamps), _headers_of(headers, len(keys)),
                    unlongs(seqs), unlongs(sts), _named(topics, names), unlongs(marks),
                    _named(sources, names), strict=True))


def _indices(values: Iterable[Any], names: tuple[Any, ...]) -> bytes:
    """Each of ``values`` as its index into ``names`` (which holds them all), by column."""
    index = {name: i for i, name in enumerate(names)}
    return longs([index[v] for v in values])


def _named(column: bytes, names: tuple[Any, ...]) -> list[Any]:
    """The values :func:`_indices` wrote."""
    return [names[i] for i in unlongs(column)]


def _headers_column(headers: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Records' headers by column: ``None`` when every record's are ``()``."""
    return None if all(h == () for h in headers) else headers


def _headers_of(column: tuple[Any, ...] | None, n: int) -> tuple[Any, ...]:
    """The headers of ``n`` records that :func:`_headers_column` wrote."""
    return column or ((),) * n


def longs(values: Iterable[int]) -> bytes:
    """``values`` as little-endian int64s."""
    packed = array("q", values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def unlongs(data: bytes) -> list[int]:
    """The ints :func:`longs` wrote."""
    packed = array("q")
    packed.frombytes(data)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


def _times(values: list[int]) -> bytes | tuple[int, ...]:
    """Buffer times as :func:`longs` writes them, or as a tuple when one exceeds int64.

    A window with an end of its own that ends at ``2**63 - 1`` (a session or sliding window
    of a record at that timestamp) is buffered at its end + 1, which int64 cannot hold.
    """
    return longs(values) if max(values) <= LONG_MAX else tuple(values)


def _untimes(column: bytes | tuple[int, ...]) -> list[int]:
    """The times :func:`_times` wrote."""
    return unlongs(column) if isinstance(column, bytes) else list(column)


def tick_rows(tops: Mapping[int, Mapping[str, int]], buckets: int, chunk: int,
              reads: Mapping[int, Mapping[Any, int]] | None = None) -> pa.RecordBatch:
    """A chunk's ticks: for each input partition in ``tops``, a row to each of its groups.

    ``tops`` maps a partition to the largest timestamp the chunk routed from it to the
    stateful node, per topic (the records' context topic); ``reads`` (if given) to the
    largest timestamp the chunk read per source (an input partition's topic, see
    :attr:`Chain.marks`) whose records reach the partition's groups. Every group of the
    partition learns them, also a group that got none of its records: a key group's stream
    time is its partition's, as every key of a task shares the task's.
    """
    reads = reads or {}
    partitions = sorted(set(tops) | set(reads))
    return _pack_batch([(group(p, b, buckets), _dumps((chunk, dict(tops.get(p, {})), None,
                                                       dict(reads.get(p, {})))),
                         max(tops.get(p, {}).values(), default=-1), 0)
                        for p in partitions for b in range(buckets)])


def _pack_batch(rows: list[tuple[int, bytes, int, int]]) -> pa.RecordBatch:
    """Pack rows ``(group, pack bytes, largest timestamp, records)`` as a record frame."""
    n = len(rows)
    return pa.RecordBatch.from_arrays([
        pa.array([AGGREGATION] * n, pa.int32()),
        pa.array([r[1] for r in rows], pa.binary()),
        pa.nulls(n, pa.binary()),
        pa.array([r[2] for r in rows], pa.int64()),
        pa.nulls(n, pa.binary()),
        pa.array([r[0] for r in rows], pa.int64()),
        pa.array([r[3] for r in rows], pa.int64()),
    ], schema=FRAME)


def unpacked(frames: Iterable[Any]
             ) -> tuple[list[tuple[Any, ...]], int, dict[int, dict[str, int]]]:
    """The records of a group's packed rows in arrival order, and its partition's time.

    ``frames`` are the pandas frames a batched processor gets (:func:`packed_frame`'s and
    :func:`tick_rows`' rows of one group). Each record is ``(key, value, timestamp,
    headers, seq, st, topic)``, each source topic's sorted by ``seq`` (stably: the records
    one record gave keep their order), the source topics merged lowest head timestamp first
    (Kafka's ``PartitionGroup``; see :func:`_merge_order`). Its ``st`` becomes the largest
    timestamp its partition routed to the stateful node before it in the micro-batch: in
    its own chunk (all topics, merged by timestamp there), and in the earlier chunks of its
    own topic: a chunk's records of a topic follow that topic's earlier chunks (a
    topic-partition split over several Spark partitions), while chunks of different topics
    are read side by side. Also returned: the largest timestamp of the whole micro-batch's
    (-1: none), and each chunk's ticks.
    """
    records: list[tuple[Any, ...]] = []
    tops: dict[int, dict[str, int]] = {}
    reads: dict[int, dict[Any, int]] = {}
    for data in frames:
        for pack in data["k"]:
            chunk, top, packed, read = _loads(pack)
            for got, mine in ((top, tops), (read, reads)):
                if got:
                    theirs = mine.setdefault(chunk, {})
                    for topic, ts in got.items():
                        if ts > theirs.get(topic, -1):
                            theirs[topic] = ts
            if packed is not None:
                records += _records(packed)
    if len({record[8] for record in records}) > 1:  # (one sort: its key ends with seq)
        read_before = _before(reads)
        records.sort(key=lambda record: _merge_order(record, read_before))
    else:
        records.sort(key=itemgetter(4))
    before = _before(tops)
    running = [ts for mine in tops.values() for ts in mine.values()]
    if len(before) > 1:
        return ([(k, v, ts, h, seq, max(st, before.get(seq >> CHUNK_BITS, {}).get(topic, -1)),
                  topic) for k, v, ts, h, seq, st, topic, _, _ in records],
                max(running, default=-1), tops)
    return [r[:7] for r in records], max(running, default=-1), tops


def _before(tops: Mapping[int, Mapping[Any, int]]) -> dict[int, dict[Any, int]]:
    """The largest timestamp of each topic in the chunks before each chunk of ``tops``.

    ``tops`` maps a chunk to its largest timestamp per topic.
    """
    before: dict[int, dict[Any, int]] = {}
    running: dict[Any, int] = {}
    for chunk in sorted(tops):
        before[chunk] = dict(running)
        for topic, ts in tops[chunk].items():
            if ts > running.get(topic, -1):
                running[topic] = ts
    return before


def _merge_order(record: tuple[Any, ...], read_before: Mapping[int, Mapping[Any, int]]
                 ) -> tuple[int, Any, int]:
    """Where a record comes when its sources are merged lowest head timestamp first.

    A source is an input partition's topic. Taking the sequence whose next record has the
    lowest timestamp is taking records by their sequence's running maximum (``mark``: the
    largest timestamp of its source's records read up to the record it came from, in its
    chunk and, through ``read_before``, the earlier chunks), then, at equal heads, the
    partition and the topic whose name sorts first (as
    :func:`~topology.runtime.engine.merge_by_timestamp` does for one partition), then by
    position: within a sequence that key never falls, and
    a record behind its sequence's maximum follows the record that set it. Records a step
    dropped before the stateful node still count: the task merges what it reads. A group
    holds one partition's sources, but after a re-key every partition's: each partition's
    records then keep their task's order, and the partitions interleave by time.
    """
    source = record[8]
    return (max(record[7], read_before.get(record[4] >> CHUNK_BITS, {}).get(source, -1)),
            source, record[4])


def pre_stage(plan: BatchPlan, topics: str | Iterable[str],
              serdes: Mapping[str, tuple[Serde[Any] | None, Serde[Any] | None]],
              spec: ChainSpec, key_bytes: Callable[[Any], bytes | None] | None,
              pack: int | None = None, source: int = 0, rekeyed: bool = False,
              regrouped: bool = False, drops_null_values: bool = False,
              keeps_null_keys: bool = False
              ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of one source DataFrame: decode, run the pre chain, frame.

    ``topics``: the topic (a ``str``) or topics the DataFrame may hold. With several, the
    plan's topic column says each row's topic (decoding refuses a row of another topic,
    naming it). Records go through the chain input partition
    by input partition, each partition's topics merged lowest timestamp first, as a task
    takes them (with several topics, over the whole chunk: the task's records are read
    before any is run). ``serdes``: the ``Consumed`` serdes of each of them.
    ``pack``: the stateful node's key buckets, whose records are packed per key group of
    their partition (:func:`packed_frame`), followed by the chunk's ticks
    (:func:`tick_rows`); ``None``: a row per record (:func:`frame`). ``source``: the
    DataFrame's index among the sources (see :func:`chunk_of`). ``rekeyed``: the records
    reach the stateful node through a repartition, whose one partition takes them all.
    ``regrouped``: the node (a table's ``group_by``) keeps its rows per input partition, but
    its changes go through a repartition: their time (``st``) spans the chunk's partitions.
    ``drops_null_values``: the node is a stream aggregation, which drops a record with a
    ``None`` value before it moves its stream time (see :func:`packed_frame`).
    ``keeps_null_keys``: the node (the as-of join) takes a ``None`` key itself.

    :raises ValueError: (in the task) for a Spark partition id or a chunk too large for the
        positions (:data:`CHUNK_BITS`).
    """
    readable = frozenset([topics] if isinstance(topics, str) else topics)

    def run(batches: Iterator[pa.RecordBatch], partition_id: int | None = None
            ) -> Iterator[pa.RecordBatch]:
        """Frame one chunk: Spark's partition ``partition_id`` (``None``: the task's)."""
        if partition_id is None:
            from pyspark import TaskContext

            context = TaskContext.get()
            partition_id = 0 if context is None else context.partitionId()
        chunk = chunk_of(source, partition_id)
        seq = chunk << CHUNK_BITS
        chain = Chain(spec)
        seen: dict[int, int] = {}
        """The largest timestamp each partition routed to the stateful node in the chunk."""
        tops: dict[int, dict[str, int]] = {}
        """The same per partition and (context) topic: the chunk's ticks."""
        reads: dict[int, dict[tuple[int, str], int]] = {}
        """Per group partition, the largest timestamp read per source: an input partition's
        topic (merge order)."""
        held: dict[int, dict[str, list[tuple[Any, ...]]]] = {}

        def framed(partition: int, by_topic: Mapping[str, Any]) -> pa.RecordBatch:
            nonlocal seq
            at = 0 if rekeyed else partition
            timed = 0 if rekeyed or regrouped else partition
            read = reads.setdefault(at, {})
            for name, records in merge_by_timestamp(by_topic):
                read[partition, name] = chain.feed(name, records, partition,
                                                   read.get((partition, name), -1))
            out, read_from, marks = chain.take_marked()
            if seq + len(out) >= (chunk + 1) << CHUNK_BITS:
                raise ValueError(f"a Spark partition of the micro-batch gave more than "
                                 f"2**{CHUNK_BITS} records: split the input further")
            if pack is None or key_bytes is None:
                batch = frame(out)
            else:
                batch, seen[timed] = packed_frame(out, key_bytes, seq, at,
                                                  seen.get(timed, -1), pack, chunk, read_from,
                                                  tops.setdefault(at, {}), drops_null_values,
                                                  keeps_null_keys, marks)
            seq += len(out)
            return batch

        for batch in batches:
            by_partition = plan.decode_partitions(pa.Table.from_batches([batch]), readable,
                                                  serdes)
            if len(readable) > 1:  # merged over the chunk: kept until it is read
                for partition, by_topic in by_partition.items():
                    mine = held.setdefault(partition, {})
                    for name, records in by_topic.items():
                        mine.setdefault(name, []).extend(records)
                continue
            for partition, by_topic in sorted(by_partition.items()):
                yield framed(partition, by_topic)
        for partition, by_topic in sorted(held.items()):
            yield framed(partition, by_topic)
        ticked = {p: mine for p, mine in tops.items() if mine}
        read = {p: mine for p, mine in reads.items() if mine}
        if pack is not None and (ticked or read):
            yield tick_rows(ticked, pack, chunk, read)

    return run


def records_of_frame(table: pa.Table) -> list[Out]:
    """The records of a record-frame table of records and processors' results.

    Rows of route :data:`~topology.spark._compile.OUTPUTS` are unpacked in place.
    """
    routes = table.column("route").to_pylist()
    keys = table.column("k").to_pylist()
    values = table.column("v").to_pylist()
    times = table.column("ts").to_pylist()
    headers = table.column("h").to_pylist()
    out: list[Out] = []
    for route, k, v, ts, h in zip(routes, keys, values, times, headers, strict=True):
        if route == OUTPUTS:
            out += _loads(k)
        else:
            out.append((route, _loads(k), _loads(v), ts, () if h is None else _loads(h)))
    return out


def outputs_frame(records: list[Out]) -> pa.RecordBatch:
    """Records leaving a batched processor, packed in one row (none: no row).

    The row's route is :data:`~topology.spark._compile.OUTPUTS`. One encoding of the list
    instead of three per record: Spark moves, converts and hands to ``foreachBatch`` one row
    per call.
    """
    if not records:
        return pa.RecordBatch.from_pylist([], schema=FRAME)
    return pa.RecordBatch.from_pylist([{
        "route": OUTPUTS, "k": _dumps(records),
        "ts": max(r[3] for r in records), "seq": 0, "st": len(records)}], schema=FRAME)
