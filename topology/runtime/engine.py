"""The engine: a topology's tasks, their outputs and their commits, as Kafka Streams runs them.

Kafka's task model: every input partition number is one task across the co-partitioned
source topics, with its own stream time, stores and buffers. Within a task, the records of
several topics are taken lowest timestamp first (Kafka's ``PartitionGroup``: each topic's
records stay in their order, and of the heads of the topics the lowest timestamp goes
next). A record written to a topic the topology reads (a repartition topic after a re-key)
goes to the task of its key's partition under Kafka's default partitioner
(:func:`~topology.runtime.partitioner.partition_for` of its serialized key): processed at
once when that is its own task, else after the current input, by the other task.

Two shapes share this code:

- **one task** (``partitions=None``): the test driver's, exactly Kafka's test driver;
- **tasks per partition** (``partitioned=True``): the Spark runner's. Every task keeps its
  state in the engine's one state database (task ``0_0`` under the plain names, task
  ``0_<p>`` under the prefix ``0_<p>.``), so that one commit covers every task: a crash
  finds every task as of the same commit.

What the sinks write is held per topic, in the order written, until read (see
:mod:`topology.runtime.outputs`); a durable driver also logs it (:mod:`.output_log`).
"""

from __future__ import annotations

import functools
import heapq
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from suppress.entry import Headers, RecordContext

from ..errors import FeedbackLoopError
from ..serde import fallback_key_bytes
from ..state.codec import decode, encode
from ..topology import Topology
from .clock import MockClock
from .metrics import TaskMetrics
from .output_log import KEYSPACE as OUTPUT_KEYSPACE
from .output_log import META_KEY as OUTPUT_META
from .output_log import OutputLog
from .outputs import holder
from .partitioner import partition_for
from .state_dir import TaskStateDir, TaskStateView
from .task import DEFAULT_COMMIT_INTERVAL_RECORDS, DEFAULT_MAX_FEEDBACK_RECORDS, Task, TaskFailure

__all__ = ("DEFAULT_APPLICATION_ID", "Engine", "Inbound", "merge_by_timestamp")

DEFAULT_APPLICATION_ID = "topology-test-driver-app"
"""The application id when none is configured: the prefix of internal topic names."""

ENGINE_META = b"engine"
"""The meta entry of a partitioned engine: its partitions and its partition count."""

Inbound = tuple[str, Any, Any, int, Headers]
"""A record sent to another task: ``(topic, key, value, timestamp, headers)``."""


class Engine:
    """Runs a topology's tasks; holds what they write; commits them in one step.

    :param clock: the wall clock every task reads (moved by the caller, then
        :meth:`wall_clock_advanced`).
    :param partitioned: ``False``: one task, ``0_0`` (the test driver). ``True``: a task per
        input partition, created at its first record (and, after a restart, for every
        partition the last commit knew).
    :param partitions: with ``partitioned``, the partition count of the source topics: a
        record written to a topic the topology reads goes to partition
        ``partition_for(key bytes, partitions)``. ``None``: unknown; then only partition 0
        may hold records of a topology that re-keys (see :meth:`check_partitions`).
    :param log_outputs: with a ``state_dir``, log the records sinks write and commit them
        with the state (the durable driver's output topics); ``False``: the caller reads
        every output before each commit (the Spark runner).
    :param state_dir, application_id, debug_metrics, fuse, max_feedback_records,
        commit_interval_records, auto_commit: as :class:`~topology.runtime.task.Task`.
    :raises ValueError: for a partition count that is not a positive int, or one that
        differs from the count the state directory was committed with.
    """

    def __init__(self, topology: Topology, clock: MockClock, application_id: str, *,
                 partitioned: bool = False, partitions: int | None = None,
                 log_outputs: bool = True, debug_metrics: bool = False, fuse: bool = True,
                 max_feedback_records: int = DEFAULT_MAX_FEEDBACK_RECORDS,
                 state_dir: str | os.PathLike[str] | None = None,
                 commit_interval_records: int = DEFAULT_COMMIT_INTERVAL_RECORDS,
                 auto_commit: bool = True) -> None:
        if partitions is not None and (type(partitions) is not int or partitions < 1):
            raise ValueError(f"partitions must be a positive int or None, got {partitions!r}")
        self.topology = topology
        self.clock = clock
        self.application_id = application_id
        self.partitioned = partitioned
        self.partitions = partitions
        self.outputs: dict[str, deque[Any]] = {}
        """Per topic, the records written and not yet read (the held flat tuples)."""
        self.debug_metrics = debug_metrics
        self.fuse = fuse
        self.max_feedback_records = max_feedback_records
        self.commit_interval_records = commit_interval_records
        self.auto_commit = auto_commit
        self._state_dir = state_dir
        self.state = TaskStateDir(state_dir, application_id)
        """The engine's state database (``<state_dir>/<application_id>/0_0``)."""
        self.durable = self.state.durable
        self._staged: dict[bytes, bytes | None] = {}
        self._inbound: dict[int, list[Inbound]] = {}
        self._log: OutputLog | None = None
        self._log_outputs = log_outputs and self.durable
        self.tasks: dict[int, Task] = {}
        """Partition -> its task."""
        self.fed_back = frozenset(t for t in topology.sink_topics if t in topology.source_topics)
        """Topics the topology writes and reads (repartition topics, a user's loop)."""
        try:
            if partitioned:
                self._open_partitioned()
            else:
                self.tasks[0] = self._new_task(0)
            if self._log_outputs:
                self._restore_outputs()
        except BaseException:
            self.close()
            raise

    # -- tasks ---------------------------------------------------------------------------------

    def _new_task(self, partition: int) -> Task:
        task_id = f"0_{partition}"
        state: TaskStateDir | TaskStateView = self.state
        route = None
        if self.partitioned:
            prefix = "" if partition == 0 else f"{task_id}."
            state = TaskStateView(self.state, prefix, self._staged)
            route = self._router(partition)
        return Task(self.topology, self.clock, self._capture, self.application_id,
                    debug_metrics=self.debug_metrics, fuse=self.fuse,
                    max_feedback_records=self.max_feedback_records, state_dir=self._state_dir,
                    commit_interval_records=self.commit_interval_records,
                    auto_commit=self.auto_commit, task_id=task_id, state=state, route=route)

    def task(self, partition: int) -> Task:
        """The task of ``partition``, created (and restored) at its first use.

        :raises ValueError: for a negative partition, or one at or past a known count.
        """
        task = self.tasks.get(partition)
        if task is None:
            self._check_partition(partition)
            if not self.partitioned and partition != 0:
                raise ValueError("this engine runs one task, partition 0")
            task = self.tasks[partition] = self._new_task(partition)
        return task

    def check_partitions(self, partitions: Iterable[int]) -> None:
        """Refuse input of these partitions before any of it is processed, if it cannot be run.

        :raises ValueError: for an invalid partition number, or, when the topology re-keys
            (writes a topic it reads) and the partition count is unknown, for any partition
            but 0: the tasks cannot tell where a re-keyed record goes.
        """
        for partition in partitions:
            self._check_partition(partition)
            if partition and self.fed_back and self.partitions is None:
                raise ValueError(
                    f"a record of partition {partition}: the topology writes topics it reads "
                    f"({sorted(self.fed_back)}), which sends each record to the task of its "
                    f"new key's partition, so the source topics' partition count is needed: "
                    f"give it as partitions=N")

    def _check_partition(self, partition: int) -> None:
        if type(partition) is not int or partition < 0 or (
                self.partitions is not None and partition >= self.partitions):
            limit = "" if self.partitions is None else f" below {self.partitions}"
            raise ValueError(f"partition {partition!r}: a partition must be an int >= 0"
                             f"{limit} (the source topics' partition count)")

    def _router(self, partition: int) -> Callable[..., bool]:
        """``route`` of the task of ``partition`` (see :class:`~topology.runtime.task.Task`)."""
        inbound = self._inbound

        def route(topic: str, key: Any, value: Any, ctx: RecordContext,
                  key_bytes: bytes | None) -> bool:
            partitions = self.partitions
            if partitions is None or partitions == 1 or key is None:
                return False
            data = key_bytes if key_bytes is not None else fallback_key_bytes(key)
            target = partition_for(data, partitions)
            if target == partition:
                return False
            inbound.setdefault(target, []).append((topic, key, value, ctx[0], ctx[4]))
            return True

        return route

    # -- processing ----------------------------------------------------------------------------

    def process(self, partition: int, runs: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Process a partition's records: ``runs`` of ``(topic, records)``, in order.

        ``records`` are ``(key, value, timestamp)`` or ``(key, value, timestamp, headers)``
        tuples. Records routed to other tasks wait for :meth:`drain_routed`.

        :raises TaskFailedError: if the task failed earlier.
        """
        task = self.task(partition)
        for topic, records in runs:
            task.process_batch(topic, records, functools.partial(_process_one, task, topic))

    def drain_routed(self) -> None:
        """Process the records re-keyed to other tasks, and those they re-key, until none.

        Each round gives every task the records sent to it, lowest partition first, each
        task's in the order they were written.

        :raises FeedbackLoopError: past ``max_feedback_records`` rounds (a cycle).
        """
        rounds = 0
        inbound = self._inbound
        while inbound:
            rounds += 1
            if rounds > self.max_feedback_records:
                raise FeedbackLoopError(
                    f"records re-keyed between tasks for more than max_feedback_records="
                    f"{self.max_feedback_records} rounds: the topology writes to topics it "
                    f"reads, in a cycle")
            batch = sorted(inbound.items())
            inbound.clear()
            for partition, records in batch:
                task = self.task(partition)
                for topic, key, value, ts, headers in records:
                    task.process(topic, key, value, ts, headers)

    def wall_clock_advanced(self) -> None:
        """Run every task's idle-close checks and due wall-clock punctuations."""
        for partition in sorted(self.tasks):
            self.tasks[partition].wall_clock_advanced()
        self.drain_routed()

    @property
    def failure(self) -> TaskFailure | None:
        """The first failure of a task, ``None`` while every task runs."""
        for partition in sorted(self.tasks):
            failure = self.tasks[partition].failure
            if failure is not None:
                return failure
        return None

    # -- outputs -------------------------------------------------------------------------------

    def _capture(self, topic: str) -> Callable[..., None]:
        """The function that keeps what sinks write to ``topic``, in order, until read."""
        outputs = self.outputs
        if not self._log_outputs:
            return holder(lambda: outputs.setdefault(topic, deque()).append)

        def append() -> Callable[[Any], None]:
            queue_append = outputs.setdefault(topic, deque()).append
            log = self._log
            assert log is not None

            def keep(record: Any) -> None:
                queue_append(record)
                log.produced(topic, record)

            return keep

        return holder(append)

    def _restore_outputs(self) -> None:
        """Open the output log; the unread records of the last commit become readable."""
        task = self.tasks[0]
        self._log = OutputLog(self.state.keyspace(OUTPUT_KEYSPACE), self.state.read_meta(
            OUTPUT_META))
        for topic, records in self._log.restore().items():
            self.outputs[topic] = deque(records)
        task.commit_meta = self._output_meta

    def _output_meta(self) -> dict[bytes, bytes | None]:
        assert self._log is not None
        unread = {topic: len(queue) for topic, queue in self.outputs.items()}
        return {OUTPUT_META: self._log.flush(unread)}

    # -- commits -------------------------------------------------------------------------------

    def commit(self, meta: Mapping[bytes, bytes | None] | None = None) -> None:
        """Commit every task's state, and ``meta``, in one atomic step.

        :raises TaskFailedError: for a durable task that failed.
        """
        if not self.partitioned:
            self.tasks[0].commit(meta)
            return
        for partition in sorted(self.tasks):
            self.tasks[partition].commit()
        entries = dict(self._staged)
        self._staged.clear()
        if self.durable:
            entries[ENGINE_META] = encode({"partitions": sorted(self.tasks),
                                           "count": self.partitions})
        if meta:
            entries.update(meta)
        self.state.commit(entries if self.durable else None)

    def read_meta(self, key: bytes) -> bytes | None:
        """A committed meta entry of the engine's state database, ``None`` if absent."""
        return self.state.read_meta(key)

    def _open_partitioned(self) -> None:
        """Restore every partition the last commit knew; check the partition count."""
        if not self.durable:
            return
        data = self.state.read_meta(ENGINE_META)
        if data is None:
            return
        image = decode(data)
        count = image["count"]
        if count is not None and self.partitions is not None and count != self.partitions:
            raise ValueError(
                f"the state directory was committed with partitions={count}, not "
                f"{self.partitions}: re-keyed records went to the tasks of {count} "
                f"partitions; keep the count, or start a new query and state directory")
        if self.partitions is None:
            self.partitions = count
        for partition in image["partitions"]:
            self.task(partition)

    # -- metrics and lifecycle -----------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Metrics by name, over every task (see ``TopologyTestDriver.metrics``).

        Counts and gauges are summed over the tasks, ``-max`` figures are the largest, and
        ``record-lateness-avg`` is over every record; suppression ``-avg`` samples (DEBUG)
        are averaged over the tasks that have them.
        """
        tasks = [self.tasks[p] for p in sorted(self.tasks)]
        if len(tasks) == 1:
            return tasks[0].metrics.as_dict()
        if not tasks:
            return TaskMetrics().as_dict()
        out: dict[str, float] = {}
        averages: Counter[str] = Counter()
        for task in tasks:
            for name, value in task.metrics.as_dict().items():
                if name.startswith("record-lateness"):
                    continue
                if "-max" in name:
                    out[name] = max(out.get(name, value), value)
                elif "-avg" in name:
                    out[name] = out.get(name, 0.0) + value
                    averages[name] += 1
                else:
                    out[name] = out.get(name, 0.0) + value
        for name, n in averages.items():
            out[name] /= n
        lateness_n = sum(t.metrics.lateness_n for t in tasks)
        out["record-lateness-avg"] = (sum(t.metrics.lateness_sum for t in tasks) / lateness_n
                                      if lateness_n else 0.0)
        out["record-lateness-max"] = float(max(t.metrics.lateness_max for t in tasks))
        return out

    def close(self) -> None:
        """Close every task, then the state database (a temporary one is removed)."""
        try:
            for partition in sorted(self.tasks):
                self.tasks[partition].close()
        finally:
            self.state.close()


def _process_one(task: Task, topic: str, record: Any) -> None:
    """A record ``Task.process_batch`` hands back: one with headers (or a bad timestamp)."""
    key, value, ts, *rest = record
    task.process(topic, key, value, ts, rest[0] if rest else ())


def merge_by_timestamp(by_topic: Mapping[str, Sequence[tuple[Any, ...]]]
                       ) -> list[tuple[str, Sequence[tuple[Any, ...]]]]:
    """One task's records of several topics in Kafka's ``PartitionGroup`` order, as runs.

    Each topic's records keep their order; of the topics' next records, the one with the
    lowest timestamp goes first (ties: the topic named first). Consecutive records of one
    topic form one ``(topic, records)`` run.

    >>> merge_by_timestamp({"a": [("k", 1, 5), ("k", 2, 1)], "b": [("k", 3, 2)]})
    [('b', [('k', 3, 2)]), ('a', [('k', 1, 5), ('k', 2, 1)])]
    """
    topics = sorted(by_topic)
    if len(topics) == 1:
        return [(topics[0], by_topic[topics[0]])]
    heads = [(records[0][2], i, 0) for i, t in enumerate(topics)
             if (records := by_topic[t])]
    heapq.heapify(heads)
    runs: list[tuple[str, list[tuple[Any, ...]]]] = []
    while heads:
        _, i, at = heapq.heappop(heads)
        records = by_topic[topics[i]]
        if runs and runs[-1][0] == topics[i]:
            runs[-1][1].append(records[at])
        else:
            runs.append((topics[i], [records[at]]))
        if at + 1 < len(records):
            heapq.heappush(heads, (records[at + 1][2], i, at + 1))
    return list(runs)
