"""``DistributedRunner``: a topology compiled to Spark operators, run on the executors.

The topology is read once (:mod:`topology.spark._compile`) and becomes one streaming query:

- stateless stream steps (``filter``, ``map``, ``map_values``, ``flat_map``, ``select_key``,
  ``peek``, ``merge``, ...) run in ``mapInArrow`` on the executors, a column batch at a time,
  through the library's own processors (same code, same errors as the test driver);
- every ``count``/``reduce``/``aggregate`` of a grouped stream (without windows, in time,
  session or sliding windows, with final results, rate-limited by ``until_time_limit`` or
  emitting every update) runs in ``transformWithStateInPandas``, the keys of each input
  partition in hash buckets (one for a bounded buffer), the library's own aggregation and
  suppression doing the work with the partition's stream time
  (:mod:`topology.spark._aggregations`);
- a table's ``suppress(until_time_limit(d, ...))`` (no Spark operator exists for it) runs
  in ``transformWithStateInPandas`` with keys grouped into a few hash buckets, so that one
  call handles a bucket's records of a micro-batch and its whole buffer is one state value
  (:mod:`topology.spark._time_limit`); it needs the RocksDB state store;
- a stream's ``join``/``left_join`` with a versioned table source runs the same way: table
  updates and stream records in one ``transformWithStateInPandas``, grouped by a hash
  bucket of the key, each key's table history a row of Spark's state store, the lookup done
  by the library's own versioned store and join processor (:mod:`topology.spark._join`), and the
  stateless steps after the join with them; an aggregation of the joined stream (the two
  stateful steps in one query) runs after it as above, on the records the join packs for
  it;
- what follows ``to_stream()`` runs in the batched processor, and ``foreachBatch`` hands each
  output topic's records to its sink (the sinks of :mod:`topology.spark.sinks`): a
  ``kafka_frame`` sink gets a DataFrame the executors compute, a ``parquet`` sink's files
  are written by the executors, and the driver collects a batch only for the other sinks.

Anything else is refused when the runner is built, naming the node
(:class:`~topology.spark.UnsupportedTopologyError`).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from types import TracebackType
from typing import Any

import pyarrow as pa

from ..errors import IllegalStateError
from ..runtime.outputs import TestRecord
from ..topology import Topology
from ._compat import require_state_api, to_arrow
from ._compile import AGGREGATION, DROPS, ChainSpec, Plan, compile_topology
from ._stages import (
    DROP_REASONS,
    FRAME,
    MAX_SOURCES,
    pre_stage,
    records_of_frame,
)
from .columns import BatchPlan, Columns, plan
from .sinks import (
    KAFKA_SINK_DDL,
    KafkaFrameSink,
    ParquetSink,
    Sink,
    checked_sinks,
    deliver,
    kafka_table,
)

__all__ = ("DistributedRunner",)

log = logging.getLogger("topology.spark")


@dataclass(frozen=True)
class _Source:
    """One source DataFrame, the topics it holds and how its columns read."""

    df: Any
    topics: frozenset[str]
    batch_plan: BatchPlan


class DistributedRunner:
    """Runs a topology as one Spark streaming query, its state in Spark's checkpoint.

    :param topology: the topology, as built by ``StreamsBuilder.build()``.
    :param sources: a streaming DataFrame for each source topic (``topic -> df``), each
        holding that topic's records, in the columns ``columns`` names; or one streaming
        DataFrame holding the records of every source topic (a Kafka source subscribed to
        them all), its topic column saying each record's topic. That DataFrame is read once
        for all its topics; it must hold only the topology's source topics: a record of
        another topic fails the query, naming the topic (subscribe to the source topics
        only, or filter the DataFrame).
    :param sinks: a sink for each output topic, as for
        :class:`~topology.spark.ForeachBatchRunner` (``sinks.memory()``, ``sinks.parquet``,
        ``sinks.kafka_frame``, or a callable ``sink(records, batch_id)``).
    :param checkpoint_dir: the query's checkpoint (offsets and Spark's state store) and
        the totals of :meth:`metrics` (in ``topology-metrics.json``): a later runner on the
        same directory resumes where this one stopped. A local path or a URI of Hadoop's
        file systems (``file:``, ``hdfs:``, ``s3a:``, ...).
    :param columns: the column mapping (:class:`~topology.spark.Columns`) of every source
        DataFrame; ``None`` is Spark's Kafka source schema. With a DataFrame per topic the
        topic column is not read: each DataFrame is its topic's. With one DataFrame it is
        needed when the topology reads more than one topic.
    :param ignore_topics: output topics whose records are dropped on purpose.
    :raises UnsupportedTopologyError: for a node it cannot run, naming it.
    :raises ColumnMappingError: for a mapping that does not fit a source's schema, or one
        DataFrame without a topic column for a topology reading several topics.
    :raises TypeError: for a topology that is not one, a source that is not a streaming
        DataFrame, or a sink that is not callable.
    :raises ValueError: for missing or unknown sources or sinks, or a time limit, join or
        batched aggregations on a session without the RocksDB state store.
    :raises IllegalStateError: on pyspark older than 4.0 (no ``transformWithStateInPandas``),
        or for a parquet sink on a session with ``spark.speculation`` on.

    Time follows Kafka's task model: each input partition (the ``partition`` column, none:
    partition 0) has its own stream time, carried to the stateful steps, so for a topology
    whose state is keyed by the input key, once drained, the sinks hold what one test driver
    per input partition holds, out-of-order input included (possibly in another order; see
    the Spark page of the docs for re-keying topologies).
    """

    def __init__(self, topology: Topology, sources: Mapping[str, Any] | Any,
                 sinks: Mapping[str, Sink] | None = None,
                 checkpoint_dir: str | os.PathLike[str] | None = None,
                 columns: Columns | None = None, *,
                 ignore_topics: Iterable[str] = ()) -> None:
        require_state_api("DistributedRunner")
        if not isinstance(topology, Topology):
            raise TypeError(f"DistributedRunner needs a Topology (StreamsBuilder.build()), "
                            f"got {type(topology).__name__}")
        if columns is not None and not isinstance(columns, Columns):
            raise TypeError(f"columns must be a Columns mapping or None, got {columns!r}")
        if checkpoint_dir is None:
            raise ValueError("DistributedRunner needs checkpoint_dir=...: Spark keeps the "
                             "query's offsets and window state there")
        compiled = compile_topology(topology)
        by_topic = dict(sources) if isinstance(sources, Mapping) else None
        if by_topic is not None:
            missing = sorted(set(compiled.sources) - set(by_topic))
            unknown = sorted(set(by_topic) - set(compiled.sources))
            if missing or unknown:
                raise ValueError(f"sources must give one streaming DataFrame per source topic "
                                 f"{sorted(compiled.sources)}, or be one DataFrame holding "
                                 f"them all: missing {missing}, unknown {unknown}")
        self.topology = topology
        self.checkpoint_dir = str(checkpoint_dir)
        self._plan = compiled
        self._sinks = checked_sinks(topology, sinks, ignore_topics)
        named = sorted(by_topic.items()) if by_topic is not None else [(None, sources)]
        for topic, df in named:
            if not getattr(df, "isStreaming", False):
                where = "sources" if topic is None else f"sources[{topic!r}]"
                raise TypeError(
                    f"{where} must be a streaming DataFrame (spark.readStream..., "
                    f"e.g. the Kafka source or a file source), got "
                    f"{'a static DataFrame' if hasattr(df, 'isStreaming') else type(df).__name__}"
                    f": DistributedRunner runs one streaming query; hand static micro-batches "
                    f"to ForeachBatchRunner (runner(batch_df, batch_id))")
        if by_topic is not None:
            mapping = replace(columns or Columns(), topic=None)
            self._sources = [_Source(df, frozenset([topic]), plan(mapping, df.schema, [topic]))
                             for topic, df in by_topic.items()]
        else:  # one DataFrame, read once, its topic column routing each record
            single: Any = sources
            self._sources = [_Source(single, frozenset(compiled.sources),
                                     plan(columns, single.schema, compiled.sources))]
        if len(self._sources) > MAX_SOURCES:
            raise ValueError(f"{len(self._sources)} source DataFrames: the runner numbers at "
                             f"most {MAX_SOURCES}; give one DataFrame holding the topics")
        self._query: Any = None
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._folded: set[tuple[str, int]] = set()
        self._dropped: Counter[str] = Counter()
        self._records_in = 0
        self._delivered: dict[str, int] = {}
        self._last_delivered = -1
        self._progress_floor = -1
        self._last_progress = -1
        self._saved: str | None = None
        self._spark = self._sources[0].df.sparkSession
        _check_parquet_sinks(self._spark, self._sinks)
        stateful = compiled.limit or compiled.join or compiled.batched
        if stateful is not None:
            _check_transform_with_state(self._spark, stateful.name)
        self._restore()

    # -- building the query --------------------------------------------------------------------

    def _frames(self) -> list[Any]:
        """Each source through its pre chain as a record frame."""
        from pyspark.sql.types import StructType

        schema = StructType.fromJson(_spark_schema(FRAME))
        frames = []
        for index, source in enumerate(self._sources):
            selected = source.df.select(*[_col(name) for name in source.batch_plan.selected])
            frames.append(selected.mapInArrow(
                plan_stage(self._plan, source.batch_plan, source.topics, index), schema))
        return frames

    def _time_limited(self, frames: list[Any]) -> Any:
        """The time-limited suppression in ``transformWithStateInPandas``, keys in buckets."""
        from pyspark.sql.types import StructType

        from ._time_limit import TimeLimitProcessor

        limit = self._plan.limit
        assert limit is not None
        rows = _packs(_drops_observed(_union(frames), DROPS_PACKED))
        schema = StructType.fromJson(_spark_schema(FRAME))
        return rows.groupBy("key_group").transformWithStateInPandas(
            TimeLimitProcessor(limit, self._plan.post), schema, "Append", "None")

    def _batched(self, rows: Any) -> Any:
        """The batched aggregation in ``transformWithStateInPandas``, keys in groups.

        ``rows`` hold its input packed (their drop rows already observed).
        """
        from pyspark.sql.types import StructType

        from ._aggregations import BatchedAggregationProcessor

        spec = self._plan.batched
        assert spec is not None
        schema = StructType.fromJson(_spark_schema(FRAME))
        regroup = self._plan.regroup
        if regroup is not None:  # a table aggregation: the table's group_by first
            from ._aggregations import buckets
            from ._regroup import RegroupProcessor

            rows = _packs(rows).groupBy("key_group").transformWithStateInPandas(
                RegroupProcessor(regroup, spec.key_serializer, buckets(spec)), schema,
                "Append", "None")
            rows = _drops_observed(rows, DROPS_REGROUPED)
        out = _packs(rows).groupBy("key_group").transformWithStateInPandas(
            BatchedAggregationProcessor(spec, self._plan.post), schema, "Append", "None")
        return _drops_observed(out)

    def _joined(self, frames: list[Any]) -> Any:
        """The as-of join in ``transformWithStateInPandas``, keys in groups (packed)."""
        from pyspark.sql.types import StructType

        from ._join import AsOfJoinProcessor

        plan_ = self._plan
        join, joined = plan_.join, plan_.joined
        assert join is not None and joined is not None
        rows = _packs(_union(frames))
        schema = StructType.fromJson(_spark_schema(FRAME))
        out = rows.groupBy("key_group").transformWithStateInPandas(
            AsOfJoinProcessor(join, joined, plan_.batched,
                              plan_.aggregation_rekeyed),
            schema, "Append", "None")
        return _drops_observed(out, DROPS_JOINED)

    def _query_frame(self) -> Any:
        """The DataFrame ``foreachBatch`` gets: the record frames of every output."""
        frames = self._frames()
        plan_ = self._plan
        direct_outputs = [f.where(f.route >= 0) for f in frames] \
            if any(route >= 0 for route in _routes(plan_.pre)) else []
        if plan_.join is not None:
            joined = self._joined(frames)
            if plan_.batched is None:
                direct_outputs.insert(0, joined.where(joined.route != DROPS))
            else:  # the aggregation runs on the joined records
                if plan_.joined is not None and any(r >= 0 for r in _routes(plan_.joined)):
                    direct_outputs.append(joined.where(joined.route >= 0))
                batched = self._batched(joined)
                direct_outputs.insert(0, batched.where(batched.route != DROPS))
        elif plan_.limit is not None:
            direct_outputs.insert(0, self._time_limited(frames))
        elif plan_.batched is not None:
            batched = self._batched(_drops_observed(_union(frames), DROPS_PACKED))
            direct_outputs.insert(0, batched.where(batched.route != DROPS))
        if not direct_outputs:
            raise ValueError("the topology writes no output topic: nothing to run")
        union = direct_outputs[0]
        for other in direct_outputs[1:]:
            union = union.unionByName(other)
        return union

    def _writer(self) -> Any:
        df = self._query_frame()
        topics = self._plan.topics
        sinks = self._sinks
        framed = {topic: sink for topic, sink in sinks.items()
                  if isinstance(sink, KafkaFrameSink)}
        """Sinks handed frames computed on the executors: their records never reach here."""
        parquet = {topic: sink for topic, sink in sinks.items() if isinstance(sink, ParquetSink)}
        """Sinks whose files the executors write: their records never reach here either."""
        collected = any(topic not in framed and topic not in parquet for topic in topics)
        """Whether the driver collects the batch: for a sink that takes records, or to count
        an ignored topic's records."""
        reread = len(framed) + len(parquet) + collected > 1

        def each_batch(batch_df: Any, batch_id: int) -> None:
            session = batch_df.sparkSession
            counts = dict.fromkeys(topics, 0)
            if reread:
                batch_df.persist()  # each sink's frame and the collection read it once
            try:
                for topic, parquet_sink in parquet.items():
                    def on_executors(staging: Any, sink: ParquetSink = parquet_sink,
                                     route: int = topics.index(topic)) -> list[tuple[str, int]]:
                        write = partial(parquet_parts, route=route, sink=sink,
                                        staging=str(staging))
                        return [(row.file, row.records) for row in batch_df.mapInArrow(
                            write, "file string, records long").collect()]

                    counts[topic] = parquet_sink.write_batch(int(batch_id), on_executors)
                if collected:
                    records = records_of_frame(to_arrow(batch_df))
                    per_topic: dict[int, list[TestRecord]] = {i: [] for i in range(len(topics))}
                    for route, key, value, ts, headers in records:
                        per_topic[route].append(TestRecord(key, value, ts, headers))
                    for route, topic in enumerate(topics):
                        if topic in parquet:
                            continue  # its files were written on the executors
                        sink = sinks.get(topic)
                        counts[topic] = len(per_topic[route])
                        if sink is not None and topic not in framed:
                            deliver(sink, per_topic[route], int(batch_id), session)
                for topic, frame_sink in framed.items():
                    rows = partial(kafka_rows, route=topics.index(topic), topic=topic,
                                   serializers=frame_sink.serializers())
                    frame = batch_df.mapInArrow(rows, KAFKA_SINK_DDL).persist()
                    try:
                        frame_sink.fn(frame, int(batch_id))
                        if not collected:
                            counts[topic] = frame.count()
                    finally:
                        frame.unpersist()
            finally:
                if reread:
                    batch_df.unpersist()
            self._delivered_batch(int(batch_id), counts)

        return (df.writeStream.foreachBatch(each_batch)
                .option("checkpointLocation", self.checkpoint_dir))

    # -- running -------------------------------------------------------------------------------

    def start(self, query_name: str | None = None,
              options: Mapping[str, Any] | None = None, **trigger: Any) -> Any:
        """Start the query and return its ``StreamingQuery``.

        :param query_name: the query's name (``DataStreamWriter.queryName``): it names the
            query in Spark's UI, its progress reports and ``spark.streams``.
        :param options: more writer options (``DataStreamWriter.options``), e.g. Spark's
            ``asyncProgressTrackingEnabled``; ``checkpointLocation`` is the runner's own
            ``checkpoint_dir`` and may not be given here.
        :param trigger: passed to ``DataStreamWriter.trigger`` (``processingTime="10
            seconds"``, ``availableNow=True``, ``once=True``); none: Spark's default, a
            micro-batch as soon as the previous one ended.
        :raises ValueError: for a ``checkpointLocation`` among ``options``.
        """
        options = dict(options or {})
        if any(key.lower() == "checkpointlocation" for key in options):
            raise ValueError("the query's checkpoint is the runner's checkpoint_dir: give it "
                             "there, not in start(options=...)")
        writer = self._writer()
        if query_name is not None:
            writer = writer.queryName(query_name)
        if options:
            writer = writer.options(**{key: str(value) for key, value in options.items()})
        if trigger:
            writer = writer.trigger(**trigger)
        self._fold_progress()  # an earlier query's last reports
        self._query = writer.start()
        return self._query

    def run_available(self, query_name: str | None = None,
                      options: Mapping[str, Any] | None = None) -> None:
        """Process all input available now, then stop (``trigger(availableNow=True)``).

        What the input's stream times made due is emitted. Errors of the query (a column
        that does not decode, an error in user code) are raised here. ``query_name`` and
        ``options`` as :meth:`start`.
        """
        query = self.start(query_name, options, availableNow=True)
        try:
            query.awaitTermination()
        finally:
            self._fold_progress()  # the last micro-batch's report, kept beside the checkpoint

    @property
    def query(self) -> Any:
        """The last ``StreamingQuery`` started (``None`` before :meth:`start`)."""
        return self._query

    def stop(self) -> None:
        """Stop the running query, if any (its last reports kept in the metrics' totals)."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        self._fold_progress()

    # -- metrics -------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The metrics of the queries this runner started, by name, as floats.

        The names are the test driver's where the meaning is the same; the figures are
        summed over every query this runner started.

        - ``dropped-records-total``: every record dropped, and per reason as
          ``dropped-records-total{reason=r}``:

          - ``null-key``: records reaching the time-limited table, an inner as-of join,
            a join's table or an aggregation with a ``None`` key (a left join joins such
            a stream record); ``null-value``,
            ``out-of-order-update``, ``expired-version``: the as-of join's and its
            versioned table's drops, as a task counts them (sent on by the join's
            processor); for aggregations, ``null-value`` and ``expired-window`` are the
            drops of their processors' aggregation, as a task counts them. These are exact.
          - ``behind-watermark``: input rows a ``transformWithState`` operator dropped
            behind Spark's watermark. None are expected: the batched processors run
            without a time mode and their input has no event-time column.

        - ``records-in-total``: rows the query read from its sources (Spark's
          ``numInputRows``). Spark counts a row each time a branch of the query scans it: a
          topology whose stateless steps write an output topic beside its stateful node
          scans its sources once per branch (with one DataFrame or one per topic alike).
        - ``records-out-total``: records handed to sinks (and ignored topics), per topic as
          ``records-out-total{topic=t}``; a micro-batch Spark runs again after a failure
          counts once.

        The figures come from Spark's progress reports of each micro-batch
        (``StreamingQuery.recentProgress``, the last 100 of them, and the last one as each
        micro-batch is delivered): they are complete once :meth:`run_available` returned or
        the query stopped, and lag by one micro-batch while it runs.

        They survive restarts: after each delivered micro-batch (and as reports are folded,
        by this method, :meth:`run_available` and :meth:`stop`) the totals are written,
        with the id of the last micro-batch delivered and of the last report added, to
        ``topology-metrics.json`` in ``checkpoint_dir``; a new runner on the same checkpoint
        starts from them. A micro-batch Spark runs again (its id at or below the one kept)
        is not counted twice. Spark reports a micro-batch only after delivering it: when the
        process ends before its report was added (killed while the query ran), that
        micro-batch's ``records-in-total`` and drops are missing from the totals; the records
        it delivered are counted.
        """
        self._fold_progress()
        with self._lock:
            dropped = self._dropped.copy()
            out = {"dropped-records-total": float(sum(dropped.values()))}
            for reason, n in sorted(dropped.items()):
                out[f"dropped-records-total{{reason={reason}}}"] = float(n)
            out["records-in-total"] = float(self._records_in)
            out["records-out-total"] = float(sum(self._delivered.values()))
            for topic, n in sorted(self._delivered.items()):
                out[f"records-out-total{{topic={topic}}}"] = float(n)
            return out

    def _delivered_batch(self, batch_id: int, counts: Mapping[str, int]) -> None:
        """Count a delivered micro-batch's records once, fold Spark's last report, keep both.

        The totals are written beside the checkpoint. A batch id at or below the last one
        counted (this runner's, or the one an earlier runner on the checkpoint kept) is
        Spark running a micro-batch again: not counted.
        """
        with self._lock:
            if batch_id > self._last_delivered:
                self._last_delivered = batch_id
                for topic, n in counts.items():
                    self._delivered[topic] = self._delivered.get(topic, 0) + n
        query = self._query
        if query is not None:
            self._fold([query.lastProgress])
        self._save()

    def _fold_progress(self) -> None:
        """Fold the last query's recent reports; keep the totals if they changed."""
        query = self._query
        if query is not None:
            self._fold(query.recentProgress)
            self._save()

    def _fold(self, reports: Iterable[Any]) -> None:
        """Add Spark's progress reports not added yet (by run and batch id).

        A report of a batch id at or below the last one an earlier runner on the checkpoint
        added (a micro-batch Spark ran again) is not added, nor one of a trigger that ran no
        micro-batch (no ``addBatch`` duration: Spark's report while idle, which carries the
        id of the next micro-batch and no state operators).
        """
        with self._lock:
            for progress in reports:
                if progress is None or "addBatch" not in (progress.durationMs or {}):
                    continue
                batch = (str(progress.runId), int(progress.batchId))
                if batch in self._folded or batch[1] <= self._progress_floor:
                    continue
                self._folded.add(batch)
                self._last_progress = max(self._last_progress, batch[1])
                for op in progress.stateOperators:
                    if op.numRowsDroppedByWatermark:
                        self._dropped["behind-watermark"] += op.numRowsDroppedByWatermark
                self._records_in += int(progress.numInputRows)
                observed = progress.observedMetrics
                for name in (DROPS_SEEN, DROPS_PACKED, DROPS_REGROUPED, DROPS_JOINED):
                    counted = observed.get(name)
                    if counted is not None:
                        for reason in DROP_REASONS:
                            if counted[reason]:
                                self._dropped[reason] += int(counted[reason])

    # -- totals kept beside the checkpoint ---------------------------------------------------

    def _totals(self) -> dict[str, Any]:
        """The totals of :meth:`metrics` and the batch ids they reach, as kept in the file."""
        with self._lock:
            return {"version": 1, "delivered_batch": self._last_delivered,
                    "progress_batch": max(self._last_progress, self._progress_floor),
                    "records_in": self._records_in, "dropped": dict(sorted(
                        self._dropped.items())),
                    "delivered": dict(sorted(self._delivered.items()))}

    def _save(self) -> None:
        """Write the totals to the checkpoint's metrics file, if they changed."""
        with self._save_lock:
            text = json.dumps(self._totals(), sort_keys=True)
            if text != self._saved:
                _write_metrics(self._spark, self.checkpoint_dir, text)
                self._saved = text

    def _restore(self) -> None:
        """Start from the totals an earlier runner kept in the checkpoint, if any."""
        text = _read_metrics(self._spark, self.checkpoint_dir)
        if text is None:
            return
        try:
            kept = json.loads(text)
            delivered_batch = int(kept["delivered_batch"])
            progress_batch = int(kept["progress_batch"])
            records_in = int(kept["records_in"])
            dropped = Counter({str(k): int(v) for k, v in kept["dropped"].items()})
            delivered = {str(k): int(v) for k, v in kept["delivered"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("ignoring the metrics kept in %s (%s: %s): metrics() starts at 0",
                        _metrics_path(self.checkpoint_dir), type(e).__name__, e)
            return
        with self._lock:
            self._last_delivered, self._progress_floor = delivered_batch, progress_batch
            self._records_in, self._dropped, self._delivered = records_in, dropped, delivered
        self._saved = text

    def __enter__(self) -> DistributedRunner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"DistributedRunner(sources={sorted(self._plan.sources)}, "
                f"sinks={sorted(self._sinks)}, checkpoint_dir={self.checkpoint_dir!r})")


METRICS_FILE = "topology-metrics.json"
"""The file in ``checkpoint_dir`` that keeps the totals of ``metrics()`` across runners."""

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""A URI's scheme (two characters at least: ``C:`` is a Windows drive)."""


def _metrics_path(checkpoint_dir: str) -> str:
    return f"{checkpoint_dir.rstrip('/')}/{METRICS_FILE}" if _URI.match(checkpoint_dir) \
        else os.path.join(checkpoint_dir, METRICS_FILE)


def _hadoop(spark: Any, checkpoint_dir: str) -> tuple[Any, Any, Any]:
    """Hadoop's file system of ``checkpoint_dir`` (through Spark's JVM) and two paths there.

    The paths: the metrics file's and its temporary one's.
    """
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path
    folder = hadoop_path(checkpoint_dir)
    fs = folder.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs, hadoop_path(folder, METRICS_FILE), hadoop_path(folder, f".{METRICS_FILE}.tmp")


def _write_metrics(spark: Any, checkpoint_dir: str, text: str) -> None:
    """Replace the metrics file with ``text``: written to a temporary name, then renamed.

    A local path with Python's IO (the rename atomic); a URI with Hadoop's ``FileSystem``
    (``file:``, ``hdfs:``, ``s3a:``, ...), where the old file is deleted before the rename
    (:func:`_read_metrics` reads the temporary file when a crash fell between the two).
    """
    data = text.encode()
    if not _URI.match(checkpoint_dir):
        os.makedirs(checkpoint_dir, exist_ok=True)
        path = os.path.join(checkpoint_dir, METRICS_FILE)
        staged = os.path.join(checkpoint_dir, f".{METRICS_FILE}.tmp")
        with open(staged, "wb") as f:
            f.write(data)
        os.replace(staged, path)
        return
    fs, path, staged = _hadoop(spark, checkpoint_dir)
    out = fs.create(staged, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()
    if fs.exists(path):
        fs.delete(path, False)
    if not fs.rename(staged, path):
        raise OSError(f"could not rename {staged.toString()} to {path.toString()}")


def _read_metrics(spark: Any, checkpoint_dir: str) -> str | None:
    """The metrics file's text (``None``: there is none)."""
    if not _URI.match(checkpoint_dir):
        path = os.path.join(checkpoint_dir, METRICS_FILE)
        try:
            with open(path, "rb") as f:
                return f.read().decode()
        except FileNotFoundError:
            return None
    fs, path, staged = _hadoop(spark, checkpoint_dir)
    for candidate in (path, staged):  # the staged file: a crash between delete and rename
        if fs.exists(candidate):
            jvm = spark.sparkContext._jvm
            buffer = jvm.java.io.ByteArrayOutputStream()
            jvm.org.apache.hadoop.io.IOUtils.copyBytes(fs.open(candidate), buffer, 4096, True)
            return str(buffer.toString("UTF-8"))
    return None


def kafka_rows(batches: Iterator[pa.RecordBatch], *, route: int, topic: str,
               serializers: tuple[Callable[[Any], bytes | None], Callable[[Any], bytes | None]]
               ) -> Iterator[pa.RecordBatch]:
    """On an executor: the records of output ``route`` in a batch's rows, in Kafka's columns.

    The rows are the query's record frames; keys and values are written by ``serializers``.
    """
    for mine in _route_records(batches, route):
        yield from kafka_table(mine, topic, *serializers).to_batches()


def parquet_parts(batches: Iterator[pa.RecordBatch], *, route: int, sink: ParquetSink,
                  staging: str) -> Iterator[pa.RecordBatch]:
    """On an executor: write the task's records of output ``route`` as one file of ``sink``.

    The rows are the query's, as for :func:`kafka_rows`. Yields the file's name and record
    count (one row; none for a task without records of the route), for the driver's
    :meth:`~topology.spark.sinks.ParquetSink.commit`.
    """
    records = [r for mine in _route_records(batches, route) for r in mine]
    if records:
        name, count = sink.write_part(records, staging)
        yield pa.record_batch({"file": [name], "records": [count]})


def _route_records(batches: Iterator[pa.RecordBatch], route: int
                   ) -> Iterator[list[TestRecord]]:
    """The records of output ``route`` in each of the query's row batches (none: skipped)."""
    for batch in batches:
        mine = [TestRecord(key, value, ts, headers) for to, key, value, ts, headers
                in records_of_frame(pa.Table.from_batches([batch])) if to == route]
        if mine:
            yield mine


def plan_stage(plan: Plan, batch_plan: BatchPlan, topics: Iterable[str], source: int = 0
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The pre stage (:func:`~topology.spark._stages.pre_stage`) of one source DataFrame.

    ``batch_plan`` reads its columns, ``topics`` are the topics it holds, ``source`` its
    index among the sources. The stage frames the records for ``plan``'s stateful node: by
    its key serializer, packed per key group when a batched processor runs it, with the
    node's rules of time (a re-key, a table's regroup, dropped ``None`` values, the join's
    kept ``None`` keys).
    """
    stateful = plan.join or plan.limit or plan.regroup or plan.batched
    key_bytes = None if stateful is None else stateful.key_serializer
    pack: int | None = None
    if plan.join is not None:
        from ._join import buckets as join_buckets

        pack = join_buckets(plan.join)
    elif plan.limit is not None:
        from ._time_limit import buckets

        pack = buckets(plan.limit)
    elif plan.regroup is not None:
        from ._regroup import BUCKETS

        pack = BUCKETS
    elif plan.batched is not None:
        from ._aggregations import buckets as aggregation_buckets

        pack = aggregation_buckets(plan.batched)
    serdes = {topic: (None, None) if consumed is None else
              (consumed.key_serde, consumed.value_serde)
              for topic in topics for consumed in [plan.sources[topic]]}
    drops_null_values = plan.batched is not None and plan.regroup is None \
        and plan.join is None and plan.batched.drops_null_values
    return pre_stage(batch_plan, frozenset(topics), serdes, plan.pre, key_bytes, pack, source,
                     plan.rekeyed, plan.regroup is not None, drops_null_values,
                     plan.join is not None)


def _routes(chain: ChainSpec) -> set[int]:
    """The routes a chain sends records to."""
    return {kid[1] for _, _, kids in chain.nodes for kid in kids if isinstance(kid, tuple)}


ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
"""The state store that Spark's ``transformWithState`` needs."""


def _check_parquet_sinks(spark: Any, sinks: Mapping[str, Sink]) -> None:
    """Refuse a parquet sink on a session with speculative execution.

    The executors write a parquet sink's files: a speculative task attempt that loses the
    race could still be writing its file when the driver commits the batch.

    :raises IllegalStateError: for a parquet sink with ``spark.speculation`` on.
    """
    topics = sorted(topic for topic, sink in sinks.items() if isinstance(sink, ParquetSink))
    if topics and str(spark.conf.get("spark.speculation", "false")).lower() == "true":
        raise IllegalStateError(
            f"the parquet sinks of topics {topics} are written by the executors, which needs "
            "Spark's speculative execution off (spark.speculation=false): a losing task "
            "attempt could leave a second copy of its records in a batch; turn it off, or "
            "write with Spark's own writer from a kafka_frame sink")


def _check_transform_with_state(spark: Any, node: str) -> None:
    """Refuse a session or a Python that ``transformWithState`` cannot run on."""
    if (importlib.util.find_spec("google") is None
            or importlib.util.find_spec("google.protobuf") is None):
        raise ValueError(
            f"{node} runs in Spark's transformWithState, whose Python worker needs the "
            f"protobuf package: pip install 'protobuf>=6.33.5' (the spark extra brings "
            f"it)")
    key = "spark.sql.streaming.stateStore.providerClass"
    provider = spark.conf.get(key, None)
    if provider != ROCKSDB_PROVIDER:
        raise ValueError(
            f"{node} runs in Spark's transformWithState, which needs the RocksDB state store: "
            f"set {key}={ROCKSDB_PROVIDER} on the session (spark.conf.set or "
            f"local_session({key.replace('.', '_')}=...)) before building the runner; it "
            f"is {provider}")


DROPS_SEEN = "topology.drops"
"""The observed metric summing the drop rows (route ``DROPS``) of the aggregations' batched
processors, one column a reason."""

DROPS_PACKED = "topology.drops-packed"
"""The same for the packing ``mapInArrow`` stage before a batched processor (the null keys it
drops)."""

DROPS_JOINED = "topology.drops-joined"
"""The same for the as-of join's processor (its drops, and when an aggregation follows, the
null keys it drops while packing the joined records)."""

DROPS_REGROUPED = "topology.drops-regrouped"
"""The same for the table's ``group_by`` before a table aggregation (the pairs its selector
gives with a ``None`` key or value)."""


def _drops_observed(rows: Any, name: str = DROPS_SEEN) -> Any:
    """``rows``, their drop rows summed per reason as they pass (observed as ``name``)."""
    from pyspark.sql import functions as F

    route, reason = F.col("route"), F.col("k")
    return rows.observe(name, *[
        F.coalesce(F.sum(F.when((route == DROPS) & (reason == F.lit(name.encode())),
                                F.col("ts"))), F.lit(0)).alias(name)
        for name in DROP_REASONS])


def _packs(rows: Any) -> Any:
    """The packed rows of a batched processor's input: ``key_group`` and ``k``.

    The packs are :func:`~topology.spark._stages.packed_frame`'s and
    :func:`~topology.spark._stages.tick_rows`'. No event-time column travels on: the
    processors keep their partitions' stream times themselves, and Spark's watermark drops
    none of their input.
    """
    from pyspark.sql import functions as F

    return (rows.where(F.col("route") == AGGREGATION)
            .select(F.col("seq").alias("key_group"), "k"))


def _union(frames: list[Any]) -> Any:
    """The record frames of every source as one DataFrame (columns matched by name)."""
    rows = frames[0]
    for other in frames[1:]:
        rows = rows.unionByName(other)
    return rows


def _col(name: str) -> Any:
    from pyspark.sql.functions import col

    return col("`" + name.replace("`", "``") + "`")


def _spark_schema(schema: pa.Schema) -> dict[str, Any]:
    """The record frame's schema in Spark's JSON form."""
    kinds = {pa.int32(): "integer", pa.int64(): "long", pa.binary(): "binary",
             pa.string(): "string"}
    return {"type": "struct", "fields": [
        {"name": f.name, "type": kinds[f.type], "nullable": True, "metadata": {}}
        for f in schema]}

