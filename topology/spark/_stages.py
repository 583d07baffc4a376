"""What the distributed runner runs inside Spark: stateless chains and window results, on Arrow.

Between its Spark operators the runner moves records in one Arrow layout, the *record
frame* (:data:`FRAME`): ``route`` (an output topic's index, or the aggregation), the key and
value as the state codec's bytes of the objects the topology produced (never pickle), the
timestamp in ms, the headers (the codec's bytes, null for none), the aggregation's key bytes
``kb`` (null elsewhere) and ``seq``, the record's position in its partition's micro-batch.
The encoded values are written and read only by the runner's own operators within one query,
never taken from a topic.

:class:`Chain` runs stateless nodes with the library's own processors (the same code, and
errors, as a task); :func:`window_records` turns the rows Spark's aggregation emits into the
records the suppression would emit, then through the post chain.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any

import pyarrow as pa

from suppress.entry import RecordContext

from ..runtime.metrics import DropReason, TaskMetrics
from ..runtime.processor import Entry, InternalProcessor
from ..runtime.processors.stateless import LONG_MAX, invalid_timestamp
from ..serde import Serde
from ..state.codec import decode, encode
from ..windows import Window, Windowed
from ._compile import AGGREGATION, DROPS, OUTPUTS, ChainSpec, WindowSpec
from .columns import BatchPlan, _decode

__all__ = ("BUCKETS", "DROP_REASONS", "FRAME", "BucketHost", "Chain", "drop_counts",
           "drop_frame", "frame", "outputs_frame", "pack_rows", "packed_frame", "pre_stage",
           "records_of_frame", "save_bucket", "unpacked", "window_records")

BUCKETS = 8
"""Key buckets of a stateful step run in ``transformWithStateInPandas`` without a bound that
spans its keys: groups of ``transformWithState``, keys by ``crc32(key bytes) % BUCKETS``;
each call handles a bucket's records of a micro-batch."""

FRAME = pa.schema([("route", pa.int32()), ("k", pa.binary()), ("v", pa.binary()),
                   ("ts", pa.int64()), ("h", pa.binary()), ("kb", pa.binary()),
                   ("seq", pa.int64()), ("st", pa.int64()), ("tp", pa.string())])
"""The record frame: the Arrow layout of records between the runner's operators.

``st`` is, for a record reaching the stateful node, the largest timestamp of the records
that reached it before in the same partition of the micro-batch (-1 for none). For a record
the as-of join sends on to a windowed aggregation, ``seq`` is the position of the stream
record it joined and ``st`` its index among the records that one gave, so that the
aggregation folds them in the order the stream records arrived. ``tp``, for a record reaching
the stateful node, is the topic a task would have read it from (its context's: a
suppression's buffer counts the name's bytes); null elsewhere."""

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
        self.exits: tuple[int, ...] | None = None
        """For a post chain of ``to_stream()`` nodes straight into output topics: their
        routes, so that window results skip the chain (the same records, fewer calls)."""
        roots = [i for indices in spec.roots.values() for i in indices]
        if all(i in spec.to_streams and
               all(not isinstance(kid, int) for kid in spec.nodes[i][2]) for i in roots):
            self.exits = tuple(kid[1] for i in roots for kid in spec.nodes[i][2])

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

    def feed(self, topic: str, records: list[tuple[Any, ...]]) -> None:
        """Pass ``(key, value, timestamp[, headers])`` records of ``topic`` through the chain."""
        roots = [p.record_entry() for p in self._roots.get(topic, ())]
        for record in records:
            ctx = RecordContext(record[2], -1, topic, 0, record[3] if len(record) > 3 else ())
            for entry in roots:
                entry(record[0], record[1], ctx)

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
        return out, topics


def frame(records: list[Out], key_bytes: Callable[[Any], bytes | None] | None,
          first_seq: int, seen: int = -1,
          positions: tuple[list[int], list[int]] | None = None,
          topics: list[str] | None = None) -> tuple[pa.RecordBatch, int]:
    """Records as a record-frame batch, and the largest stateful-input timestamp seen.

    ``kb`` (by ``key_bytes``), ``st`` and ``tp`` (from ``topics``, one per record, if given)
    are for the records routed to a stateful node (a negative route);
    ``seen``: the largest timestamp routed there before these records. ``positions``, given,
    are the ``seq`` and ``st`` columns instead (the join's records: see :data:`FRAME`).
    """
    kb: list[bytes | None] = []
    st: list[int] = []
    tp: list[str | None] = []
    for i, (route, key, _, ts, _) in enumerate(records):
        if route >= 0:
            kb.append(None)
            st.append(-1)
            tp.append(None)
            continue
        kb.append(None if key is None or key_bytes is None else key_bytes(key))
        st.append(seen)
        tp.append(None if topics is None else topics[i])
        if ts > seen:
            seen = ts
    seq: Any = range(first_seq, first_seq + len(records))
    if positions is not None:
        seq, st = positions
    batch = pa.RecordBatch.from_arrays([
        pa.array([r[0] for r in records], pa.int32()),
        pa.array([_dumps(r[1]) for r in records], pa.binary()),
        pa.array([_dumps(r[2]) for r in records], pa.binary()),
        pa.array([r[3] for r in records], pa.int64()),
        pa.array([_dumps(r[4]) if r[4] else None for r in records], pa.binary()),
        pa.array(kb, pa.binary()),
        pa.array(seq, pa.int64()),
        pa.array(st, pa.int64()),
        pa.array(tp, pa.string()),
    ], schema=FRAME)
    return batch, seen


class BucketHost:
    """What the library's processors in a batched processor read of their task.

    The store (built fresh by ``store_factory``, named ``store``) and the counters: drops
    (null keys or values, closed windows, rejected writes) are counted in :attr:`metrics` and
    logged on the executor, as a task logs them; the processor sends the counts on as drop
    rows.
    """

    def __init__(self, store: str, store_factory: Callable[[], Any]) -> None:
        self.stores = {store: store_factory()}
        self.metrics = TaskMetrics()


class FiledRows:
    """A bucket's key-value rows ``(key, value, timestamp)``, each filed on its own.

    A row is kept as the state codec's bytes under its key's bytes (by ``key_bytes``, the
    store's key serializer), and goes into ``store`` only when :meth:`open` is called with a
    key of those bytes, before the call's first record of the key is processed; :meth:`filed`
    encodes again only the rows of the keys opened since. So a call decodes and encodes the
    rows its records name, whatever the number of keys the bucket holds.

    :param filed: the bucket's rows as :meth:`filed` returned them; a ``list`` of rows (one
        value of all rows, as releases before this filing saved them) is filed at once;
        ``None`` for none.
    """

    def __init__(self, store: Any, key_bytes: Callable[[Any], bytes | None],
                 filed: dict[bytes, bytes] | list[tuple[Any, Any, int]] | None) -> None:
        self._store = store
        self._key_bytes = key_bytes
        self._opened: dict[bytes, Any] = {}
        if isinstance(filed, list):
            filed = {key_bytes(key) or b"": _dumps((key, value, ts)) for key, value, ts in filed}
        self._filed: dict[bytes, bytes] = filed or {}

    def open(self, key: Any) -> None:
        """Put ``key``'s filed row into the store, the first time the call names the key."""
        if key is None:
            return
        kb = self._key_bytes(key)
        if kb is None or kb in self._opened:
            return
        self._opened[kb] = key
        row = self._filed.get(kb)
        if row is not None:
            stored_key, value, ts = _loads(row)
            self._store.put_with_timestamp(stored_key, value, ts)

    def filed(self) -> dict[bytes, bytes]:
        """Every row by key bytes, the opened keys' rows as the store now holds them."""
        filed, store = self._filed, self._store
        for kb, key in self._opened.items():
            kept = store.get_with_timestamp(key)
            if kept is None:
                filed.pop(kb, None)
            else:
                filed[kb] = _dumps((key, kept[0], kept[1]))
        self._opened = {}
        return filed


def save_bucket(handle: Any, state: Any, data: bytes | None, due: int | None) -> None:
    """Replace a bucket's one state value (``None``: clear it) and its one timer.

    ``handle`` is the processor's ``StatefulProcessorHandle``, ``state`` its value state;
    ``due`` the event time (ms) at which the bucket must run again without input (``None``:
    never).
    """
    for timer in handle.listTimers():
        handle.deleteTimer(timer)
    if data is None:
        state.clear()
    else:
        state.update((data,))
    if due is not None:
        handle.registerTimer(due)


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
        pa.nulls(n, pa.binary()),
        pa.array([0] * n, pa.int64()),
        pa.array([-1] * n, pa.int64()),
        pa.nulls(n, pa.string()),
    ], schema=FRAME)


def packed_frame(records: list[Out], key_bytes: Callable[[Any], bytes | None],
                 first_seq: int, seen: int, buckets: int, topics: list[str]
                 ) -> tuple[pa.RecordBatch, int]:
    """:func:`frame`, but the records routed to the stateful node packed per key bucket.

    A record to an output topic is a row as in :func:`frame`. The records to the stateful
    node become one row per bucket (``crc32(key bytes) % buckets``): route
    :data:`~topology.spark._compile.AGGREGATION`, ``k`` the codec's bytes of their list of ``(key,
    value, timestamp, headers, seq, st, topic)`` (as in :data:`FRAME`; ``topics``: each
    record's), ``ts``
    their largest timestamp, ``seq`` the bucket and ``st`` their number; those with a
    ``None`` key are dropped and counted in a :func:`drop_frame` row. So Spark moves, sorts
    and converts one row per bucket instead of one per record.
    """
    rows: list[Out] = []
    seqs: list[int] = []
    packs: dict[int, list[tuple[Any, ...]]] = {}
    null_keys = 0
    seq = first_seq
    for record, topic in zip(records, topics, strict=True):
        route, key, value, ts, headers = record
        if route >= 0:
            rows.append(record)
            seqs.append(seq)
        else:
            kb = None if key is None else key_bytes(key)
            if kb is None:
                null_keys += 1
            else:
                packs.setdefault(zlib.crc32(kb) % buckets, []).append(
                    (key, value, ts, headers, seq, seen, topic))
            if ts > seen:
                seen = ts
        seq += 1
    batch, _ = frame(rows, None, 0, positions=(seqs, [-1] * len(rows)))
    parts = [batch]
    if packs:
        parts.append(pack_rows(packs))
    if null_keys:
        parts.append(drop_frame({DropReason.NULL_KEY: null_keys}))
    if len(parts) == 1:
        return batch, seen
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0], seen


def pack_rows(packs: Mapping[int, list[tuple[Any, ...]]]) -> pa.RecordBatch:
    """Packs of records as record-frame rows, one per bucket (see :func:`packed_frame`).

    ``packs`` maps a bucket to its records, each a tuple whose third item is its timestamp.
    """
    order = sorted(packs)
    n = len(order)
    return pa.RecordBatch.from_arrays([
        pa.array([AGGREGATION] * n, pa.int32()),
        pa.array([_dumps(packs[b]) for b in order],
                 pa.binary()),
        pa.nulls(n, pa.binary()),
        pa.array([max(r[2] for r in packs[b]) for b in order], pa.int64()),
        pa.nulls(n, pa.binary()),
        pa.nulls(n, pa.binary()),
        pa.array(order, pa.int64()),
        pa.array([len(packs[b]) for b in order], pa.int64()),
        pa.nulls(n, pa.string()),
    ], schema=FRAME)


def unpacked(frames: Iterable[Any]) -> list[tuple[Any, ...]]:
    """The records of packed rows (:func:`packed_frame`, :func:`pack_rows`) in arrival order.

    ``frames`` are the pandas frames a batched processor gets; each record is ``(key, value,
    timestamp, headers, seq, st, topic)``, sorted by ``seq`` (stably: the records one record
    gave keep their order).
    """
    records: list[tuple[Any, ...]] = []
    for data in frames:
        for pack in data["k"]:
            records += _loads(pack)
    records.sort(key=itemgetter(4))
    return records


def pre_stage(plan: BatchPlan, topics: str | Iterable[str],
              serdes: Mapping[str, tuple[Serde[Any] | None, Serde[Any] | None]],
              spec: ChainSpec, key_bytes: Callable[[Any], bytes | None] | None,
              pack: int | None = None
              ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of one source DataFrame: decode, run the pre chain, frame.

    ``topics``: the topic (a ``str``) or topics the DataFrame may hold. With several, the
    plan's topic column says each row's topic (:meth:`~topology.spark.columns.BatchPlan.decode`
    refuses a row of another topic, naming it), and the records of each run of one topic go
    to that topic's roots, in the DataFrame's order: the DataFrame is read once for all of
    them. ``serdes``: the ``Consumed`` serdes of each of them.
    ``pack``: the stateful node's key buckets, whose records are packed per bucket
    (:func:`packed_frame`); ``None``: a row per record (:func:`frame`).
    """
    readable = frozenset([topics] if isinstance(topics, str) else topics)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        seq = (0 if context is None else context.partitionId()) << 40
        chain = Chain(spec)
        seen = -1
        for batch in batches:
            for name, records in plan.decode(pa.Table.from_batches([batch]), readable,
                                             serdes):
                chain.feed(name, records)
            out, read_from = chain.take_with_topics()
            if pack is None or key_bytes is None:
                framed, seen = frame(out, key_bytes, seq, seen, topics=read_from)
            else:
                framed, seen = packed_frame(out, key_bytes, seq, seen, pack, read_from)
            yield framed
            seq += len(out)

    return run


def window_records(table: pa.Table, window: WindowSpec, key_mode: Any,
                   post: Chain) -> list[Out]:
    """The final results in Spark's aggregated rows, run through the post chain.

    ``table`` has ``start``, ``end``, ``ts`` (ms), ``k``, ``h`` and ``n`` (a count) or
    ``vals`` (a list of ``(bt, seq, st, v)``: each value with its batch time and position,
    so values fold in arrival order; see :data:`FRAME`). ``key_mode``: ``"codec"`` (the
    record frame's ``k``), ``("serde", serde, topic)`` (a binary key column read by the
    source's serde) or ``"plain"`` (a column of another type). Windows come out by (end, key
    bytes), as a task emits windows closing together.
    """
    n = table.num_rows
    if n == 0:
        return []
    table = table.sort_by([("end", "ascending"), ("kb", "ascending")])
    starts = table.column("start").to_pylist()
    ends = table.column("end").to_pylist()
    times = table.column("ts").to_pylist()
    k = table.column("k").combine_chunks()
    if key_mode == "codec":
        keys = [_loads(b) for b in k.to_pylist()]
    elif key_mode == "plain":
        keys = k.to_pylist()
    else:
        keys = _decode(k, key_mode[1], key_mode[2], "key")
    headers = [() if h is None else _loads(h) for h in table.column("h").to_pylist()]
    if window.count:
        values = table.column("n").to_pylist()
    else:
        values = [_fold(key, vals, window) for key, vals in
                  zip(keys, table.column("vals").to_pylist(), strict=True)]
    windows: dict[tuple[int, int], Window] = {}
    exits = post.exits
    out: list[Out] = []
    for i in range(n):
        value = values[i]
        if value is None:
            continue  # the aggregate was deleted: final results drop tombstones
        win = windows.get((starts[i], ends[i]))
        if win is None:
            win = windows[starts[i], ends[i]] = Window(starts[i], ends[i])
        if exits is None:
            ctx = RecordContext(times[i], -1, "", 0, headers[i])
            post.feed_change(Windowed(keys[i], win), value, ctx)
        else:
            key = Windowed(keys[i], win)
            for route in exits:
                out.append((route, key, value, times[i], headers[i]))
    return out if exits is not None else post.take()


def _fold(key: Any, vals: list[dict[str, Any]], window: WindowSpec) -> Any:
    """Fold a window's values in arrival order, as the windowed aggregate does.

    A session's aggregate calls, for each record after the first, the merger on a fresh
    ``initializer()`` and the session's aggregate (the session it extends) before the
    aggregator: the same calls here.
    """
    vals.sort(key=lambda v: (v["bt"], v["seq"], v["st"]))
    initializer, aggregator, merger = window.initializer, window.aggregator, window.merger
    agg: Any = None
    for item in vals:
        value = _loads(item["v"])
        if agg is None:  # the first value, or the aggregate was deleted: start afresh
            agg = value if initializer is None else aggregator(key, value, initializer())
        elif merger is not None and initializer is not None:
            agg = aggregator(key, value, merger(key, initializer(), agg))
        else:
            agg = aggregator(key, value, agg)
    return agg


def records_of_frame(table: pa.Table) -> list[Out]:
    """The records of a record-frame table (its ``kb`` and ``seq`` are not needed).

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
