"""``ForeachBatchRunner``: a topology run by Spark Structured Streaming's ``foreachBatch``.

Each micro-batch leaves Spark as one Arrow table (``DataFrame.toArrow()``, never row by row),
is decoded column-wise (see :mod:`topology.spark.columns`) and fed, in the DataFrame's order,
through one task: a :class:`~topology.TopologyTestDriver` whose stores live under
``state_dir``. Then every output topic's records go to its sink, and the stores, buffers and
the batch id are committed together. A batch id at or below the committed one is skipped
(Spark's ``foreachBatch`` is at-least-once: after a crash it re-runs the batch that was not
committed), so every record's effect is applied exactly once.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ..runtime.clock import Clock, SystemClock
from ..testing.driver import TopologyTestDriver
from ..topology import Topology
from .columns import Columns, plan
from .sinks import Sink, checked_sinks, deliver

__all__ = ("BatchProgress", "ForeachBatchRunner")

BATCH_ID_META = "topology.spark.batch_id"
"""The commit meta entry holding the last committed batch id (ASCII digits)."""


@dataclass(frozen=True)
class BatchProgress:
    """What one call of the runner did."""

    batch_id: int
    skipped: bool
    """The batch id was at or below the committed one: nothing was processed or written."""
    records_in: int = 0
    records_out: dict[str, int] = field(default_factory=dict)
    """Records handed to each sink (and dropped for each ignored topic)."""
    seconds: float = 0.0
    """Wall time of the call: transfer, processing, sinks and commit."""


class ForeachBatchRunner:
    """Runs a topology over micro-batches: ``query.writeStream.foreachBatch(runner)``.

    :param topology: the topology, as built by ``StreamsBuilder.build()``.
    :param state_dir: where the task's stores, buffers and commits live; a later runner on
        the same directory resumes from the last committed batch. It belongs with one query
        checkpoint (batch ids are the query's): keep them together, and start both afresh or
        neither. ``None``: a private temporary directory, removed by :meth:`close` (nothing
        survives the process).
    :param sinks: a sink for each output topic (``topic -> sink``; see
        :mod:`topology.spark.sinks`): ``sinks.memory()``, ``sinks.parquet(path)``,
        ``sinks.kafka_frame(fn)`` or any callable ``sink(records, batch_id)``.
    :param columns: the column mapping (:class:`~topology.spark.Columns`); ``None`` is
        Spark's Kafka source schema.
    :param config: the driver's config (``TopologyTestDriver(topology, config)``).
    :param ignore_topics: output topics whose records are dropped on purpose.
    :param clock: the wall clock (:class:`~topology.runtime.clock.Clock`, ms since the epoch)
        the task runs on; ``None``: the system clock. The runner reads it at the start of
        each micro-batch, before the batch's records: wall-clock punctuations and idle close
        (``Suppressed.with_idle_close``) fire then, and their output goes out and commits
        with the batch. A batch delivered again after a failure reads the clock again, so
        what the wall clock made due may differ from the failed attempt's (sinks that write
        by batch id, such as ``sinks.parquet``, keep only the last attempt).
    :raises TypeError: for a topology that is not one, or a sink that is not callable.
    :raises ValueError: for a sink of a topic the topology does not write, an output topic
        with neither a sink nor a place in ``ignore_topics``, or an invalid config.

    Every output topic needs a sink or must be listed in ``ignore_topics``: records a
    topology writes are never dropped unless the caller said so.

    **Failure.** An error while a batch is read (a column mapping that does not fit, bytes a
    serde cannot read, a null timestamp) is raised before any record of it is processed, and
    the runner stays usable. An error after processing began (in user code, a full buffer, a
    sink) stops the runner: the call raises, the runner releases ``state_dir`` without
    committing anything of the batch, and every later call raises :class:`RuntimeError`.
    Restart the query with a new runner on the same ``state_dir``: it resumes from the last
    commit, Spark delivers the failed batch again, and the result is that of one run without
    the failure. Without a ``state_dir`` nothing survives: a new runner starts from scratch.
    """

    def __init__(self, topology: Topology, state_dir: str | os.PathLike[str] | None = None,
                 sinks: Mapping[str, Sink] | None = None, columns: Columns | None = None,
                 config: Mapping[str, Any] | None = None, *,
                 ignore_topics: Iterable[str] = (), clock: Clock | None = None) -> None:
        if not isinstance(topology, Topology):
            raise TypeError(f"ForeachBatchRunner needs a Topology (StreamsBuilder.build()), "
                            f"got {type(topology).__name__}")
        if columns is not None and not isinstance(columns, Columns):
            raise TypeError(f"columns must be a Columns mapping or None, got {columns!r}")
        sinks = checked_sinks(topology, sinks, ignore_topics)
        internal = topology.internal_topics
        outputs = topology.sink_topics - internal
        self.topology = topology
        self.columns = columns
        self._sinks = sinks
        self._sources = frozenset(topology.source_topics - internal)
        self._consumed = {topic: (node.consumed.key_serde, node.consumed.value_serde)
                          for node in topology.nodes
                          if node.kind == "source" and node.consumed is not None
                          for topic in node.topics}
        # The batch is the unit of work: its state, the outputs read and its id commit
        # together, in the runner's commit; the driver commits nothing on its own.
        self._clock = SystemClock() if clock is None else clock
        self._wall_ms = self._clock.now_ms()  # where the driver's wall clock is
        self._driver = TopologyTestDriver(topology, {**(config or {}), "auto_commit": False},
                                          state_dir=state_dir, initial_wall_clock_ms=self._wall_ms)
        self._inputs = {t: self._driver.create_input_topic(t) for t in self._sources}
        self._outputs = {t: self._driver.create_output_topic(t) for t in sorted(outputs)}
        self._broken: str | None = None
        self.last_progress: BatchProgress | None = None
        """What the last call did (``None`` before the first)."""

    @property
    def committed_batch_id(self) -> int | None:
        """The last committed batch id, ``None`` before the first commit."""
        data = self._driver.committed_meta(BATCH_ID_META)
        return None if data is None else int(data.decode("ascii"))

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """Process one micro-batch: ``foreachBatch``'s function.

        :raises ColumnMappingError: for a mapping or data that does not fit, before any
            record is processed.
        :raises RuntimeError: if an earlier batch failed after processing began.
        """
        started = time.perf_counter()
        batch_id = int(batch_id)
        if self._broken is not None:
            raise RuntimeError(self._broken)
        committed = self.committed_batch_id
        if committed is not None and batch_id <= committed:
            self.last_progress = BatchProgress(batch_id, skipped=True,
                                               seconds=time.perf_counter() - started)
            return
        batch_plan = plan(self.columns, batch_df.schema, self._sources)
        from pyspark.sql.functions import col

        table = batch_df.select(*[col(_quoted(name)) for name in batch_plan.selected]
                                ).toArrow()
        runs = batch_plan.decode(table, self._sources, self._consumed)
        try:
            now = self._clock.now_ms()
            if now > self._wall_ms:  # idle close and wall-clock punctuations first
                self._driver.advance_wall_clock_time(now - self._wall_ms)
                self._wall_ms = now
            for topic, records in runs:
                self._inputs[topic].pipe_records(records)
            counts = {}
            session = batch_df.sparkSession
            for topic, output in self._outputs.items():
                records_out = output.read_records_to_list()
                counts[topic] = len(records_out)
                sink = self._sinks.get(topic)
                if sink is not None:
                    deliver(sink, records_out, batch_id, session)
            self._driver.commit({BATCH_ID_META: str(batch_id).encode("ascii")})
        except BaseException as exc:
            self._broken = (
                f"batch {batch_id} failed after its records began to be processed "
                f"({type(exc).__name__}: {exc}), so this runner stopped; restart with a new "
                f"ForeachBatchRunner on the same state_dir: it resumes from the last commit, "
                f"and Spark delivers the batch again")
            with contextlib.suppress(Exception):  # the batch's error is the one to see
                self._driver.close()  # releases state_dir; commits nothing (no auto-commit)
            raise
        self.last_progress = BatchProgress(batch_id, False, table.num_rows, counts,
                                           time.perf_counter() - started)

    def metrics(self) -> dict[str, float]:
        """The task's metrics, as ``TopologyTestDriver.metrics()``.

        ``dropped-records-total``, ``suppression-buffer-count``, ...
        """
        return self._driver.metrics()

    def close(self) -> None:
        """Close the task (a temporary ``state_dir`` is removed)."""
        self._driver.close()

    def __enter__(self) -> ForeachBatchRunner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ForeachBatchRunner(sources={sorted(self._sources)}, "
                f"sinks={sorted(self._sinks)}, committed_batch_id={self.committed_batch_id})")


def _quoted(name: str) -> str:
    """A column name as Spark's ``col()`` reads it literally (dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"

