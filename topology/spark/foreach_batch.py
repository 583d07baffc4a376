"""``ForeachBatchRunner``: a topology run by Spark Structured Streaming's ``foreachBatch``.

Each micro-batch leaves Spark as one Arrow table (``DataFrame.toArrow()``, on pyspark 3.5 its
Arrow batches: never row by row) and is decoded column-wise (see
:mod:`topology.spark.columns`). Then it runs as Kafka Streams runs a topology
(:mod:`topology.runtime.engine`): each input partition is one task, with its own stream time,
stores and buffers; a task takes the records of its topics lowest timestamp first; a re-keyed
record goes to the task of its new key's partition. Then every output topic's records go to its
sink, and every task's state and the batch id are committed together. The same batch id again
is a replay (Spark's ``foreachBatch`` is at-least-once: after a crash it re-runs the batch it
had not committed) and is skipped; a lower one belongs to another checkpoint and is refused.

With ``state_dir`` a URI (``s3a://``, ``hdfs://``, ``file:`` ...), the working copy lives in
``local_dir`` and every commit uploads what it changed (:mod:`topology.spark._remote`); a
runner whose local copy is missing or not the URI's latest restores from the URI.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import IllegalStateError, StreamsError, TaskFailedError
from ..runtime.clock import Clock, MockClock, SystemClock
from ..runtime.engine import Engine, merge_by_timestamp
from ..runtime.outputs import plain_records
from ..runtime.task import DEFAULT_MAX_FEEDBACK_RECORDS
from ..state.codec import decode, encode
from ..topology import Topology
from ._compat import to_arrow
from .columns import Columns, plan
from .sinks import Sink, checked_sinks, deliver

__all__ = ("BatchProgress", "CheckpointMismatchError", "ForeachBatchRunner", "RunnerTotals")

log = logging.getLogger("topology.spark")

APPLICATION_ID = "topology-spark-runner"
"""The application id of the runner's state (``<state_dir>/<application id>/0_0``)."""
BATCH_META = b"runner.batch"
"""The commit meta entry holding the last committed batch id (ASCII digits)."""
TOTALS_META = b"runner.totals"
"""The commit meta entry holding the runner's totals (:class:`RunnerTotals`)."""
_DROPPED = "dropped-records-total{reason="
_URI_SCHEMES = ("file:", "hdfs:", "s3a:", "s3:", "s3n:", "abfs:", "abfss:", "gs:", "wasb:",
                "wasbs:", "viewfs:", "dbfs:")


class CheckpointMismatchError(StreamsError, RuntimeError):
    """A micro-batch that the state cannot belong to.

    The state and the query's checkpoint were not started together (or one was restored
    without the other). Raised before any record of the batch is processed; nothing reaches
    the sinks.
    """


@dataclass(frozen=True)
class BatchProgress:
    """What one call of the runner did."""

    batch_id: int
    skipped: bool
    """The batch id was the committed one (a replay): nothing was processed or written."""
    records_in: int = 0
    records_out: dict[str, int] = field(default_factory=dict)
    """Records handed to each sink (and dropped for each ignored topic)."""
    seconds: float = 0.0
    """Wall time of the call: transfer, processing, sinks and commit."""
    records_in_by_topic: dict[str, int] = field(default_factory=dict)
    """Input records per source topic."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Records dropped in this batch, per reason (``expired-window`` for late records)."""
    partitions: tuple[int, ...] = ()
    """The input partitions the batch held (a task each)."""


@dataclass(frozen=True)
class RunnerTotals:
    """The runner's counts since its state was created, surviving restarts (committed)."""

    batches: int = 0
    """Micro-batches processed and committed."""
    replays_skipped: int = 0
    """Micro-batches skipped as replays of the committed one."""
    records_in: dict[str, int] = field(default_factory=dict)
    records_out: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    """Dropped records per reason."""


class ForeachBatchRunner:
    """Runs a topology over micro-batches: ``query.writeStream.foreachBatch(runner)``.

    :param topology: the topology, as built by ``StreamsBuilder.build()``.
    :param state_dir: where every task's stores, buffers and commits live: a local path, or a
        URI that Spark's Hadoop FileSystem writes (``file:``, ``hdfs:``, ``s3a:``,
        ``abfss:``, ``gs:``). A later runner on the same ``state_dir`` resumes from the last
        committed batch. It belongs with one query checkpoint (batch ids are the query's):
        keep them side by side (``<app>/checkpoint`` and ``<app>/state``), and start both
        afresh or neither. ``None``: a private temporary directory, removed by
        :meth:`close` (nothing survives the process).
    :param sinks: a sink for each output topic (``topic -> sink``; see
        :mod:`topology.spark.sinks`).
    :param columns: the column mapping (:class:`~topology.spark.Columns`); ``None`` is
        Spark's Kafka source schema (its ``partition`` column gives each record's task).
    :param config: ``application_id``, ``metrics_recording_level``, ``fuse_final_results``,
        ``max_feedback_records`` as the test driver takes them.
    :param ignore_topics: output topics whose records are dropped on purpose.
    :param clock: the wall clock (ms since the epoch) the tasks run on; ``None``: the
        system clock. The runner reads it at the start of each micro-batch, before the
        batch's records: wall-clock punctuations and idle close
        (``Suppressed.with_idle_close``) fire then, and their output goes out and commits
        with the batch.
    :param local_dir: with a URI ``state_dir``, where the working copy lives (``None``: a
        private temporary directory, removed by :meth:`close`). Ignored for a local path.
    :param partitions: the partition count of the source topics. Needed when the topology
        re-keys (writes a topic it reads: ``group_by`` with a new key, a table
        ``group_by``) and the input holds partitions other than 0: a re-keyed record goes to
        the task of partition ``murmur2(key bytes) % partitions``, as Kafka's default
        partitioner sends it. Committed with the state; a different count later is refused.
    :raises TypeError: for a topology that is not one, or a sink that is not callable.
    :raises ValueError: for a sink of a topic the topology does not write, an output topic
        with neither a sink nor a place in ``ignore_topics``, an invalid config, or a
        partition count that differs from the committed one.

    Every output topic needs a sink or must be listed in ``ignore_topics``: records a
    topology writes are never dropped unless the caller said so.

    **Failure.** An error while a batch is read (a column mapping that does not fit, bytes a
    serde cannot read, a null timestamp or partition) is raised before any record of it is
    processed, and the runner stays usable; so is a :class:`CheckpointMismatchError`. An
    error after processing began (in user code, a full buffer, a sink) stops the runner:
    the call raises, the runner releases its state without committing anything of the
    batch, and every later call raises :class:`~topology.errors.TaskFailedError` (a
    ``RuntimeError``) naming the batch and the first cause. Restart the query with a new
    runner on the same ``state_dir``: it resumes from the last commit, Spark delivers the
    failed batch again, and the result is that of one run without the failure.

    **Progress.** One INFO line per batch on the ``topology.spark`` logger (records in per
    topic, out per topic, drops per reason, partitions), :attr:`last_progress` for the last
    call and :attr:`totals` since the state was created.
    """

    def __init__(self, topology: Topology, state_dir: str | os.PathLike[str] | None = None,
                 sinks: Mapping[str, Sink] | None = None, columns: Columns | None = None,
                 config: Mapping[str, Any] | None = None, *,
                 ignore_topics: Iterable[str] = (), clock: Clock | None = None,
                 local_dir: str | os.PathLike[str] | None = None,
                 partitions: int | None = None) -> None:
        if not isinstance(topology, Topology):
            raise TypeError(f"ForeachBatchRunner needs a Topology (StreamsBuilder.build()), "
                            f"got {type(topology).__name__}")
        if columns is not None and not isinstance(columns, Columns):
            raise TypeError(f"columns must be a Columns mapping or None, got {columns!r}")
        self.topology = topology
        self.columns = columns
        self._sinks = checked_sinks(topology, sinks, ignore_topics)
        internal = topology.internal_topics
        self._sources = frozenset(topology.source_topics - internal)
        self._outputs = sorted(topology.sink_topics - internal)
        self._consumed = {topic: (node.consumed.key_serde, node.consumed.value_serde)
                          for node in topology.nodes
                          if node.kind == "source" and node.consumed is not None
                          for topic in node.topics}
        config = dict(config or {})
        known = {"application_id", "metrics_recording_level", "fuse_final_results",
                 "max_feedback_records"}
        unknown = set(config) - known
        if unknown:
            raise ValueError(f"unknown runner config keys: {sorted(unknown)}; known: "
                             f"{sorted(known)} (the runner commits once per micro-batch)")
        level = config.get("metrics_recording_level", "INFO")
        if level not in ("INFO", "DEBUG"):
            raise ValueError(f"metrics_recording_level must be 'INFO' or 'DEBUG', got {level!r}")
        self._clock = SystemClock() if clock is None else clock
        self._wall_ms = self._clock.now_ms()
        self._remote_uri = _uri(state_dir)
        self._temporary: Path | None = None
        self._cleanup: weakref.finalize[Any, Any] | None = None
        if self._remote_uri is not None:
            if local_dir is None:
                self._temporary = Path(tempfile.mkdtemp(prefix="topology-runner-"))
                # removed at close(), or when the runner is collected or the process exits
                self._cleanup = weakref.finalize(self, shutil.rmtree, self._temporary, True)
                local_dir = self._temporary
            local: str | os.PathLike[str] | None = local_dir
        else:
            local = state_dir
        self._remote: Any = None
        self._local = local
        self._application_id = str(config.get("application_id", APPLICATION_ID))
        self._partitions = partitions
        self._debug = level == "DEBUG"
        self._fuse = config.get("fuse_final_results", True)
        self._max_feedback = config.get("max_feedback_records", DEFAULT_MAX_FEEDBACK_RECORDS)
        self._engine: Engine | None = None
        self._committed: int | None = None
        self._broken: str | None = None
        self._failure: BaseException | None = None
        self._failed_node: str | None = None
        self._totals = RunnerTotals()
        self._replays = 0
        self.last_progress: BatchProgress | None = None
        """What the last call did (``None`` before the first)."""
        if self._remote_uri is None:
            self._open(None)

    # -- state ---------------------------------------------------------------------------------

    def _open(self, spark: Any) -> Engine:
        """The engine, opened at first use (from the URI's latest version if there is one)."""
        if self._engine is not None:
            return self._engine
        if self._remote_uri is not None:
            from ._remote import RemoteState

            assert self._local is not None
            self._remote = RemoteState(self._remote_uri, _session(spark))
            _restore(self._remote, Path(self._local) / self._application_id / "0_0")
        engine = Engine(self.topology, MockClock(self._wall_ms), self._application_id,
                        partitioned=True, partitions=self._partitions, log_outputs=False,
                        debug_metrics=self._debug, fuse=self._fuse,
                        max_feedback_records=self._max_feedback, state_dir=self._local,
                        auto_commit=False)
        self._engine = engine
        if engine.durable:
            data = engine.read_meta(TOTALS_META)
            if data is not None:
                self._totals = RunnerTotals(**decode(data))
            data = engine.read_meta(BATCH_META)
            self._committed = None if data is None else int(data.decode("ascii"))
        return engine

    @property
    def committed_batch_id(self) -> int | None:
        """The last committed batch id, ``None`` before the first commit."""
        if self._engine is None and self._broken is None and self._committed is None:
            self._open(None)
        return self._committed

    @property
    def totals(self) -> RunnerTotals:
        """Counts since the state was created (committed; replays skipped since)."""
        totals = self._totals
        return RunnerTotals(totals.batches, totals.replays_skipped + self._replays,
                            dict(totals.records_in), dict(totals.records_out),
                            dict(totals.dropped))

    # -- a micro-batch -------------------------------------------------------------------------

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """Process one micro-batch: ``foreachBatch``'s function.

        :raises ColumnMappingError: for a mapping or data that does not fit, before any
            record is processed.
        :raises CheckpointMismatchError: for a batch id below the committed one, or past the
            next one, before any record is processed.
        :raises ValueError: for a partition the runner cannot run (see ``partitions``).
        :raises TaskFailedError: (a ``RuntimeError``) if an earlier batch failed after
            processing began.
        """
        started = time.perf_counter()
        batch_id = int(batch_id)
        if self._broken is not None:
            failure = self._failure
            assert failure is not None
            raise TaskFailedError(self._broken, self._failed_node, failure) from failure
        engine = self._open(batch_df.sparkSession)
        committed = self.committed_batch_id
        if committed is not None:
            if batch_id == committed:
                self._replays += 1
                self.last_progress = BatchProgress(batch_id, skipped=True,
                                                   seconds=time.perf_counter() - started)
                log.info("batch %d: a replay of the committed batch, skipped", batch_id)
                return
            if batch_id != committed + 1:
                raise CheckpointMismatchError(self._mismatch(batch_id, committed))
        batch_plan = plan(self.columns, batch_df.schema, self._sources)
        from pyspark.sql.functions import col

        table = to_arrow(batch_df.select(*[col(_quoted(name))
                                           for name in batch_plan.selected]))
        by_partition = batch_plan.decode_partitions(table, self._sources, self._consumed)
        engine.check_partitions(by_partition)
        before = _drops(engine.metrics())
        try:
            now = self._clock.now_ms()
            if now > self._wall_ms:  # idle close and wall-clock punctuations first
                engine.clock.advance(now - self._wall_ms)
                self._wall_ms = now
                engine.wall_clock_advanced()
            for partition in sorted(by_partition):
                engine.process(partition, merge_by_timestamp(by_partition[partition]))
            engine.drain_routed()
            counts = self._deliver(engine, batch_id, batch_df.sparkSession)
            dropped = +(_drops(engine.metrics()) - before)
            records_in = dict(sum((Counter({t: len(r) for t, r in runs.items()})
                                   for runs in by_partition.values()), Counter()))
            totals = self._add(records_in, counts, dropped)
            self._commit(engine, batch_id, totals)
        except BaseException as exc:
            self._fail(batch_id, exc)
            raise
        self._totals = totals
        self._replays = 0
        progress = BatchProgress(batch_id, False, table.num_rows, counts,
                                 time.perf_counter() - started, records_in, dict(dropped),
                                 tuple(sorted(by_partition)))
        self.last_progress = progress
        log.info("batch %d: %d records in %s from partitions %s; out %s; dropped %s; %.3f s",
                 batch_id, progress.records_in, records_in, list(progress.partitions), counts,
                 dict(dropped) or "none", progress.seconds)

    def _mismatch(self, batch_id: int, committed: int) -> str:
        where = "a used state" if batch_id < committed else "a state that is behind"
        return (f"micro-batch {batch_id} arrived, but the state at {self._where()} committed "
                f"batch {committed}: the query's checkpoint and {where} were not started "
                f"together. Start a new query with a new checkpointLocation and a new "
                f"state_dir, or restore both as of the same batch; nothing of batch "
                f"{batch_id} was processed")

    def _where(self) -> str:
        if self._remote_uri is not None:
            return self._remote_uri
        return "a temporary directory" if self._local is None else str(self._local)

    def _deliver(self, engine: Engine, batch_id: int, spark: Any) -> dict[str, int]:
        """Hand each output topic's records to its sink; forget internal topics' records."""
        counts = {}
        outputs = engine.outputs
        for topic in self._outputs:
            queue = outputs.get(topic)
            records = plain_records(queue) if queue else []
            if queue:
                queue.clear()
            counts[topic] = len(records)
            sink = self._sinks.get(topic)
            if sink is not None:
                deliver(sink, records, batch_id, spark)
        for queue in outputs.values():
            queue.clear()  # repartition topics: their records were processed
        return counts

    def _add(self, records_in: Mapping[str, int], records_out: Mapping[str, int],
             dropped: Mapping[str, int]) -> RunnerTotals:
        totals = self._totals
        return RunnerTotals(
            totals.batches + 1, totals.replays_skipped + self._replays,
            dict(Counter(totals.records_in) + Counter(records_in)),
            dict(Counter(totals.records_out) + Counter(records_out)),
            dict(Counter(totals.dropped) + Counter(dropped)))

    def _commit(self, engine: Engine, batch_id: int, totals: RunnerTotals) -> None:
        """Commit every task with the batch id and totals; with a URI, upload it."""
        engine.commit({BATCH_META: str(batch_id).encode("ascii"),
                       TOTALS_META: encode(totals.__dict__)})
        if self._remote is not None:
            _upload(engine, self._remote, batch_id)
        self._committed = batch_id

    def _fail(self, batch_id: int, exc: BaseException) -> None:
        self._failure = exc
        engine_failure = None if self._engine is None else self._engine.failure
        self._failed_node = None if engine_failure is None else engine_failure.node
        self._broken = (
            f"batch {batch_id} failed after its records began to be processed "
            f"({type(exc).__name__}: {exc}), so this runner stopped; restart with a new "
            f"ForeachBatchRunner on the same state_dir: it resumes from the last commit, "
            f"and Spark delivers the batch again")
        with contextlib.suppress(Exception):  # the batch's error is the one to see
            self._close_engine()  # releases the state; commits nothing of the batch

    # -- metrics and lifecycle -----------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The tasks' metrics, as ``TopologyTestDriver.metrics()`` (summed over the tasks).

        ``dropped-records-total``, ``suppression-buffer-count``, ...; they count since this
        runner started (:attr:`totals` survives restarts).
        """
        engine = self._engine
        return {} if engine is None else engine.metrics()

    def _close_engine(self) -> None:
        engine, self._engine = self._engine, None
        try:
            if engine is not None:
                engine.close()
        finally:
            if self._remote is not None:
                self._remote.close()

    def close(self) -> None:
        """Close the tasks (a temporary state or working copy is removed)."""
        try:
            self._close_engine()
        finally:
            self._temporary = None
            if self._cleanup is not None:
                self._cleanup()

    def __enter__(self) -> ForeachBatchRunner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ForeachBatchRunner(sources={sorted(self._sources)}, "
                f"sinks={sorted(self._sinks)}, state={self._where()})")


def _quoted(name: str) -> str:
    """A column name as Spark's ``col()`` reads it literally (dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"


def _drops(metrics: Mapping[str, float]) -> Counter[str]:
    """Dropped records per reason, from a metrics dict."""
    return Counter({name[len(_DROPPED):-1]: int(n) for name, n in metrics.items()
                    if name.startswith(_DROPPED)})


def _uri(state_dir: str | os.PathLike[str] | None) -> str | None:
    """``state_dir`` if it is a URI of Spark's Hadoop FileSystem, else ``None``."""
    if isinstance(state_dir, str) and state_dir.lower().startswith(_URI_SCHEMES):
        return state_dir
    return None


def _session(spark: Any) -> Any:
    """The given Spark session, or the active one."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise IllegalStateError("a URI state_dir is read through Spark's Hadoop FileSystem: "
                           "start a SparkSession first")
    return session


def _restore(remote: Any, database: Path) -> None:
    """Make the working copy ``database`` the URI's latest version, if it is not already."""
    latest = remote.latest()
    if latest is None:
        if database.exists():  # a working copy of some other state: the URI is the truth
            shutil.rmtree(database)
        return
    version, _ = latest
    if database.exists() and _local_batch(database) == version:
        return
    if database.exists():
        shutil.rmtree(database)
    database.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    remote.download(version, database)


def _local_batch(database: Path) -> int | None:
    """The batch id committed in the working copy ``database`` (``None``: none or unreadable)."""
    from ..state.rocksdb import StateDB

    try:
        with StateDB.open(database) as db:
            data = db.read_meta(BATCH_META)
    except Exception:  # noqa: BLE001 - a copy that does not open is replaced, not repaired
        return None
    return None if data is None else int(data.decode("ascii"))


def _upload(engine: Engine, remote: Any, batch_id: int) -> None:
    """Upload the commit just made: a checkpoint of the state, then the URI's pointer."""
    snapshot = Path(tempfile.mkdtemp(prefix="topology-upload-")) / "snapshot"
    try:
        engine.state.checkpoint(snapshot)
        remote.upload(snapshot, batch_id, str(batch_id).encode("ascii"))
    finally:
        shutil.rmtree(snapshot.parent, ignore_errors=True)
