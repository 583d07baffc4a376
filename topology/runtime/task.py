"""A task: runs one topology instance to completion for each input record.

One task, one partition per topic, as Kafka's test driver. Records produced to a topic that a
source of the same topology reads (repartition topics, or a user's loop) are queued and
processed, in order, before :meth:`Task.process` returns; one input record may feed back at
most ``max_feedback_records`` of them (:class:`~topology.errors.FeedbackLoopError`, naming the
cycle that :mod:`topology.runtime.feedback` finds).

Here are the task and its processing loop. Its other parts are its base classes, each in a
module of its own: its failure (:mod:`topology.runtime.failure`: an exception while a record is
processed fails the task, as Kafka stops a stream thread), its punctuations
(:mod:`topology.runtime.punctuation`), and its state on disk, commits and restore
(:mod:`topology.runtime.durability`).
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from suppress.entry import Headers, RecordContext
from suppress.processor import SuppressionView, SuppressMetrics
from suppress.time import NO_TIMESTAMP

from ..errors import FeedbackLoopError, StoreError, UnknownTopicError
from ..topology import Topology
from ..windows import LONG_MAX
from .clock import Clock
from .durability import TaskDurability
from .durability import spill_keyspace_name as spill_keyspace_name
from .durability import store_keyspace_name as store_keyspace_name
from .failure import TaskFailure, TaskFailures
from .feedback import feedback_cycle, feedback_message
from .metrics import TaskMetrics
from .processor import Entry, Forward, InternalProcessor
from .punctuation import Schedule, TaskPunctuation
from .state_dir import TaskStateDir, TaskStateView, spill_options
from .store_specs import store_signatures

__all__ = ("DEFAULT_MAX_FEEDBACK_RECORDS", "Task", "TaskFailure")

DEFAULT_MAX_FEEDBACK_RECORDS = 10_000
"""How many records one input record may feed back through topics the topology reads."""
DEFAULT_COMMIT_INTERVAL_RECORDS = 10_000
"""With a state directory, a bulk call commits after every this many input records."""

Produce = Callable[..., None]
"""``produce(key, value, ctx, key_bytes=None, value_bytes=None)``: one record written to a
topic; the bytes are given when the sink serialized the record."""
Output = Callable[[str], Produce]
"""``output(topic)`` gives the function that receives what sinks write to ``topic``."""
Convert = Callable[[Any], Any]
Route = Callable[[str, Any, Any, RecordContext, "bytes | None"], bool]
"""``route(topic, key, value, context, key_bytes)``: see :class:`Task`'s ``route``."""


class InputCodec(NamedTuple):
    """How the key and value of piped records reach the source (see :meth:`Task.process_batch`).

    Each function ``None`` leaves that part as it is.
    """

    key_serializer: Convert | None
    value_serializer: Convert | None
    key_deserializer: Convert | None
    value_deserializer: Convert | None
    keeps: Callable[[Sequence[Any]], bool] | None = None
    """``keeps(records)`` true: for a list of records, the codec gives back the key and value
    of every plain ``(key, value, timestamp)`` record themselves and raises nothing, so the
    list may be processed without it (false says nothing about any one record)."""


_new_tuple = tuple.__new__  # a RecordContext of checked values, without its __new__

CODEC_CHECK_RECORDS = 4096
"""Records of a piped list checked at once by :attr:`InputCodec.keeps` (any size gives the
same results; a list that fails the check runs through the codec record by record)."""


class Task(TaskFailures, TaskPunctuation, TaskDurability):
    """Processors, stores and clocks of one running topology.

    :param output: ``output(topic)`` returns the function that receives every record written
        to ``topic``, called as ``(key, value, context, key_bytes=None, value_bytes=None)``.
    :param debug_metrics: record DEBUG-level metrics (suppression buffer size/count samples).
    :param fuse: let each windowed aggregation whose only child is a final-results
        suppression hand its changes straight to the suppression's buffer (same results,
        faster), by window and key, without windowed keys
        (:meth:`~topology.runtime.processors.aggregate.WindowedAggregateBase.hand_changes_to`).
    :param max_feedback_records: the most records one input record may feed back through
        topics the topology reads.
    :param state_dir: where on-disk state lives: ``<state_dir>/<application_id>/0_0`` (spilled
        suppression buffers: a scratch database ``0_0.spill`` beside it);
        ``None``: a private temporary directory removed by :meth:`close` (see
        :class:`~topology.runtime.state_dir.TaskStateDir`). With a ``state_dir`` the task is
        *durable*: stores default to RocksDB, and :meth:`commit` writes every store, buffer,
        input offset, stream time and the caller's meta (the driver's outputs) in one atomic
        step; a task created on the same directory continues from the last commit.
    :param commit_interval_records: with a ``state_dir``, :meth:`process_batch` commits after
        every this many records (and every call commits when it returns).
    :param auto_commit: ``False``: a durable task commits only when :meth:`commit` is called.
    :param task_id: the task's id (Kafka's ``<subtopology>_<partition>``), naming its spill
        database ``<task_id>.spill``.
    :param state: the task's part of a state database several tasks share
        (:class:`~topology.runtime.state_dir.TaskStateView`); ``None``: a database of its own
        under ``state_dir``.
    :param route: for the tasks of several partitions: ``route(topic, key, value, context,
        key_bytes)`` is called for each record written to a topic this topology reads, and
        returns ``True`` when it took the record to the task of another partition; ``False``
        keeps it here, processed before the current input returns.
    """

    def __init__(self, topology: Topology, clock: Clock, output: Output,
                 application_id: str, *, debug_metrics: bool = False, fuse: bool = True,
                 max_feedback_records: int = DEFAULT_MAX_FEEDBACK_RECORDS,
                 state_dir: str | os.PathLike[str] | None = None,
                 commit_interval_records: int = DEFAULT_COMMIT_INTERVAL_RECORDS,
                 auto_commit: bool = True, task_id: str = "0_0",
                 state: TaskStateDir | TaskStateView | None = None,
                 route: Route | None = None) -> None:
        if type(max_feedback_records) is not int or max_feedback_records < 1:
            raise ValueError(f"max_feedback_records must be a positive int, "
                             f"got {max_feedback_records!r}")
        if type(commit_interval_records) is not int or commit_interval_records < 1:
            raise ValueError(f"commit_interval_records must be a positive int, "
                             f"got {commit_interval_records!r}")
        self.task_id = task_id
        self.state = TaskStateDir(state_dir, application_id) if state is None else state
        """The task's on-disk state, opened on first use; committed after each call that
        processes input or advances time."""
        self.durable = self.state.durable
        """Whether the state outlives the task (a ``state_dir``): see :meth:`commit`."""
        self.commit_interval_records = commit_interval_records
        self.auto_commit = auto_commit
        self.commit_meta: Callable[[], Mapping[bytes, bytes | None]] | None = None
        """Called at each commit for more meta entries to commit (the driver's outputs)."""
        self.committed_offsets: dict[str, int] = {}
        """Input offsets (next offset per topic) as of the last commit restored or made."""
        self.spill_state = TaskStateDir(state_dir, application_id, f"{task_id}.spill",
                                        spill_options)
        """The disk tiers of spilling suppression buffers, opened at the first spill and
        committed after each call that processes input or advances time (and as the buffers
        write). A database of its own: scratch space committed mid-step, which must not
        commit the pending writes of durable state with it."""
        self.topology = topology
        self.application_id = application_id
        self.debug_metrics = debug_metrics
        self.max_feedback_records = max_feedback_records
        self.clock = clock
        self.metrics = TaskMetrics()
        self.stream_time = NO_TIMESTAMP
        self.failure: TaskFailure | None = None
        """Set when the task failed (see :mod:`topology.runtime.failure`)."""
        self.suppressors: dict[str, SuppressionView] = {}
        """Suppression node name -> its stream time and buffer, whichever path runs it."""
        self.handing: set[str] = set()
        """Windowed aggregations that hand changes to their suppression by window."""
        self._looked_up: set[str] = set()
        """Suppressions a join reads (see :meth:`suppression_lookup`); never handed changes."""
        self.stores: dict[str, Any] = {spec.name: self._create_store(spec)
                                       for spec in topology.stores}
        self._store_kinds = {spec.name: spec.kind for spec in topology.stores}
        self._store_signatures = store_signatures(topology.stores) if self.durable else b""
        """The :data:`~topology.runtime.store_specs.STORES_META` entry every commit writes."""
        self.metrics.versioned_stores = [self.stores[spec.name] for spec in topology.stores
                                         if spec.kind == "versioned"]
        self._output = output
        self._route = route
        self._queue: deque[tuple[str, Any, Any, int, Headers]] = deque()
        self._offsets: dict[str, int] = {}  # next offset per topic, piped or re-queued
        self._stream_schedules: list[Schedule] = []
        self._wall_schedules: list[Schedule] = []
        self._wall_listeners: list[Callable[[int], None]] = []
        self.processors: dict[str, InternalProcessor] = {}
        for node in topology.nodes:
            proc = node.factory()
            proc.name = node.name
            self.processors[node.name] = proc
        self.sources = {self.resolve_topic(t): node for node in topology.nodes
                        if node.kind == "source" for t in node.topics}
        # Parents first, as Kafka (the order of user processors' init and punctuations).
        for node in topology.nodes:
            self.processors[node.name].init(self)
        if self.durable:
            self._restore()
        if fuse:
            self._fuse()
        entries = {name: Entry(p.record_entry(), p.change_entry(), p.stale_entry())
                   for name, p in self.processors.items()}
        raw: dict[str, Callable[..., None]] = {}
        for name in self.handing:
            raw_entry = self.processors[name].raw_entry()  # type: ignore[attr-defined]
            if raw_entry is not None:
                raw[name] = raw_entry
        for node in topology.nodes:
            self.processors[node.name].connect([entries[c.name] for c in node.children])
        # A source passes records through: each topic's records go straight to its children.
        self._entries: dict[str, Forward] = {
            topic: self.processors[node.name].forward for topic, node in self.sources.items()}
        # ... and, where its only child takes them, as (key, value, timestamp, offset, topic)
        self._raw_entries: dict[str, Callable[..., None]] = {
            topic: raw[node.children[0].name] for topic, node in self.sources.items()
            if len(node.children) == 1 and node.children[0].name in raw}

    def _fuse(self) -> None:
        """Let each windowed aggregation hand its changes to a final-results suppression.

        Where the suppression is the aggregation's only child and keeps its keys by parts
        (:meth:`~topology.runtime.processors.suppress.SuppressNodeProcessor.window_entry`),
        the aggregation's changes go to the suppression's buffer without windowed keys. A
        late-records sink below the aggregation does not count as a child: late records go
        through the aggregation as on the separate path.
        """
        from .processors.aggregate import WindowedAggregateBase
        from .processors.suppress import SuppressNodeProcessor

        for node in self.topology.nodes:
            parent = self.processors[node.name]
            if not isinstance(parent, WindowedAggregateBase):
                continue
            children = [c for c in node.children if c.name != parent.late_sink]
            if len(children) != 1:
                continue
            child = self.processors[children[0].name]
            if child.name in self._looked_up or not isinstance(child, SuppressNodeProcessor):
                continue
            if child.take_changes_from(parent):
                self.handing.add(node.name)

    def register_suppression(self, name: str, view: SuppressionView, metrics: SuppressMetrics,
                             store_name: str | None) -> None:
        """Record suppression ``name``: its view, its metrics, and its buffer as a store."""
        self.suppressors[name] = view
        self.metrics.suppressors[name] = metrics
        if store_name is not None:
            self.stores[store_name] = view
            self._store_kinds[store_name] = "suppression-buffer"

    def suppression_lookup(self, name: str) -> Callable[[Any], tuple[bool, Any]]:
        """``prior_value(key)`` of suppression ``name``, for a join reading its table.

        Called while processors are initialised (the suppression is initialised first, as
        its node was defined first); the suppression then takes changes as windowed keys.

        :raises KeyError: if no suppression ``name`` was initialised yet.
        """
        self._looked_up.add(name)
        engine: Any = self.suppressors[name]
        prior_value: Callable[[Any], tuple[bool, Any]] = engine.prior_value
        return prior_value

    def resolve_topic(self, topic: str) -> str:
        """The real name of ``topic``: internal topics get the application id as prefix."""
        if topic in self.topology.internal_topics:
            return f"{self.application_id}-{topic}"
        return topic

    def sink_serdes(self, topic: str) -> list[tuple[Any, Any]]:
        """``(key serde, value serde)`` of each sink that writes ``topic`` (``None``: none)."""
        from .processors.stateless import SinkProcessor

        return [(node.key_serde, node.value_serde) for node in self.processors.values()
                if isinstance(node, SinkProcessor) and self.resolve_topic(node.topic) == topic]

    # -- processing ----------------------------------------------------------------------------

    def process(self, topic: str, key: Any, value: Any, timestamp: int,
                headers: Headers = ()) -> None:
        """Process one input record to completion (re-queued internal records included).

        Offsets per input topic start at 0 and go up by one per record.

        :raises UnknownTopicError: if no source reads ``topic`` (the task stays usable).
        :raises TaskFailedError: if the task failed earlier.
        :raises FeedbackLoopError: if the record fed back too many records (the task fails).
        """
        self._check_alive()
        if topic not in self._entries:
            raise UnknownTopicError(f"Unknown topic: {topic}")
        try:
            self._process_one(topic, key, value, timestamp, headers)
        except BaseException as exc:
            self._fail(exc, topic, self._offsets[topic] - 1, key, value, timestamp)
            raise
        if self._queue:
            self._drain()
        self._commit_call()

    def _process_one(self, topic: str, key: Any, value: Any, timestamp: int,
                     headers: Headers) -> None:
        """One record through the topology: offset, stream time, lateness, punctuation."""
        offsets = self._offsets
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        metrics = self.metrics
        metrics.lateness_n += 1
        if timestamp >= self.stream_time:
            self.stream_time = timestamp
        else:
            late = self.stream_time - timestamp
            metrics.lateness_sum += late
            if late > metrics.lateness_max:
                metrics.lateness_max = late
        raw = self._raw_entries.get(topic) if not headers else None
        if raw is not None:
            raw(key, value, timestamp, offset, topic)  # builds a context only if it needs one
        else:
            self._entries[topic](key, value,
                                 _new_tuple(RecordContext, (timestamp, offset, topic, 0, headers)))
        if self._stream_schedules:
            self._punctuate_stream_time()

    def process_batch(self, topic: str, records: Iterable[Any],
                      other: Callable[[Any], None], codec: InputCodec | None = None) -> None:
        """Process records in order, each to completion.

        Plain ``(key, value, timestamp)`` tuples are processed as :meth:`process` would, with
        the per-record overhead hoisted out of the loop; anything else (a ``TestRecord``, a
        tuple with headers) is handed to ``other(record)`` in its turn.

        :param codec: how a plain tuple's key and value reach the source when the caller
            serializes them (a test topic with serdes): each is serialized by the caller's
            function, then read by the source's deserializer. A serializer's error is the
            caller's (it propagates, and the task keeps running); a deserializer's fails the
            task at the source, as :meth:`fail_on_input`.
        :raises UnknownTopicError: if no source reads ``topic``.
        :raises TaskFailedError: if the task failed earlier.
        :raises ValueError: for a timestamp that is not a non-negative int; the records
            before it have been processed.
        """
        if not (self.durable and self.auto_commit):
            self._process_batch(topic, records, other, codec)
            self._commit_call()
            return
        it = iter(records)
        while chunk := list(itertools.islice(it, self.commit_interval_records)):
            self._process_batch(topic, chunk, other, codec)
            self.commit()

    def _process_batch(self, topic: str, records: Iterable[Any],
                       other: Callable[[Any], None], codec: InputCodec | None) -> None:
        """:meth:`process_batch` without its commits.

        A list (or tuple) piped through a codec that can tell it keeps records as they are
        runs in slices of :data:`CODEC_CHECK_RECORDS`, each without the codec where the
        check says so (only for a sequence: an iterator is not read ahead of processing).
        """
        keeps = None if codec is None else codec.keeps
        if keeps is None or not isinstance(records, list | tuple):
            self._process_records(topic, records, other, codec)
            return
        for i in range(0, len(records), CODEC_CHECK_RECORDS):
            chunk = records[i:i + CODEC_CHECK_RECORDS]
            self._process_records(topic, chunk, other, None if keeps(chunk) else codec)

    def _process_records(self, topic: str, records: Iterable[Any],
                         other: Callable[[Any], None], codec: InputCodec | None) -> None:
        """:meth:`_process_batch` of ``records`` with or without the codec."""
        self._check_alive()
        forward: Forward | None = None  # resolved at the first plain record
        raw: Callable[..., None] | None = None
        metrics = self.metrics
        queue = self._queue
        schedules = self._stream_schedules
        offsets = self._offsets
        offset = offsets.get(topic, 0)
        stream_time = self.stream_time
        late_n = late_sum = late_max = 0
        key_ser, value_ser, key_des, value_des, _ = codec if codec is not None else (None,) * 5
        try:
            for record in records:
                if type(record) is not tuple or len(record) != 3 or type(record[2]) is not int \
                        or not 0 <= record[2] <= LONG_MAX:
                    offsets[topic] = offset
                    try:
                        other(record)  # a TestRecord, headers, or a bad timestamp (raises)
                    finally:
                        offset = offsets[topic]
                        stream_time = self.stream_time
                    continue
                key, value, ts = record
                if forward is None:
                    forward = self._entries.get(topic)
                    if forward is None:
                        raise UnknownTopicError(f"Unknown topic: {topic}")
                    raw = self._raw_entries.get(topic)
                if codec is not None:
                    if key_ser is not None:
                        key = key_ser(key)
                    if value_ser is not None:
                        value = value_ser(value)
                    try:
                        if key_des is not None:
                            key = key_des(key)
                        if value_des is not None:
                            value = value_des(value)
                    except Exception as exc:
                        offsets[topic] = offset
                        self.fail_on_input(exc, topic, key, value, ts)
                        offset = offsets[topic]
                        raise
                this_offset = offset
                offset += 1
                late_n += 1
                if ts >= stream_time:
                    stream_time = self.stream_time = ts
                else:
                    late = stream_time - ts
                    late_sum += late
                    if late > late_max:
                        late_max = late
                try:
                    if raw is not None:  # the step builds a context only if it needs one
                        raw(key, value, ts, this_offset, topic)
                    else:
                        forward(key, value,
                                _new_tuple(RecordContext, (ts, this_offset, topic, 0, ())))
                except BaseException as exc:
                    self._fail(exc, topic, this_offset, key, value, ts)
                    raise
                if schedules or queue:
                    offsets[topic] = offset  # the next offset, for records queued to this topic
                    try:
                        if schedules:
                            self._punctuate_stream_time()
                        if queue:
                            self._drain()
                    except BaseException as exc:
                        self._fail(exc, topic, this_offset, key, value, ts)
                        raise
                    finally:
                        offset = offsets[topic]
                        stream_time = self.stream_time
        finally:
            offsets[topic] = offset
            metrics.lateness_n += late_n
            metrics.lateness_sum += late_sum
            if late_max > metrics.lateness_max:
                metrics.lateness_max = late_max

    def _drain(self) -> None:
        """Process records written to topics this topology reads, in the order written.

        A queued record gets its offset when it is processed; as processing is synchronous
        and first in first out, that is the order it was written in.

        :raises FeedbackLoopError: past ``max_feedback_records`` records for one input.
        """
        queue = self._queue
        limit = self.max_feedback_records
        processed = 0
        while queue:
            processed += 1
            if processed > limit:
                cycle = feedback_cycle(self.topology.nodes, self.sources, self.resolve_topic)
                error = FeedbackLoopError(feedback_message(limit, cycle))
                self._fail(error, None, None, None, None, None)
                raise error
            topic, key, value, ts, headers = queue.popleft()
            try:
                self._process_one(topic, key, value, ts, headers)
            except BaseException as exc:
                self._fail(exc, topic, self._offsets[topic] - 1, key, value, ts)
                raise

    def producer_for(self, topic: str) -> Produce:
        """The function a sink writing ``topic`` calls for each record.

        Records are delivered to the output; those written to a topic that a source of this
        topology reads are also queued and processed before the current input returns.
        """
        deliver = self._output(topic)
        if topic not in self.sources:
            return deliver
        queue = self._queue
        route = self._route

        def produce(key: Any, value: Any, ctx: RecordContext, key_bytes: bytes | None = None,
                    value_bytes: bytes | None = None) -> None:
            deliver(key, value, ctx, key_bytes, value_bytes)
            if route is None or not route(topic, key, value, ctx, key_bytes):
                queue.append((topic, key, value, ctx.timestamp, ctx.headers))

        return produce

    def wall_clock_advanced(self) -> None:
        """Run idle-close checks, due wall-clock punctuations, then anything they queued.

        :raises TaskFailedError: if the task failed earlier.
        """
        self._check_alive()
        now = self.clock.now_ms()
        try:
            for listener in self._wall_listeners:
                listener(now)
            for schedule in list(self._wall_schedules):
                schedule.maybe_fire(now)
        except BaseException as exc:
            self._fail(exc, None, None, None, None, None)
            raise
        self._drain()
        self._commit_call()

    # -- stores --------------------------------------------------------------------------------

    def public_store(self, name: str) -> Any:
        """The store ``name``.

        :raises StoreError: if the topology has no such store.
        """
        store = self.stores.get(name)
        if store is None:
            raise StoreError(f"no state store named {name!r}; stores: {sorted(self.stores)}")
        return store

    def store_kind(self, name: str) -> str | None:
        """``"key-value"``, ``"window"`` ... for a known store, else ``None``."""
        return self._store_kinds.get(name)

    def close(self) -> None:
        """Close every processor, then every store (buffered suppress records are not emitted).

        Then the state directory (a temporary one is removed). A store read after this
        raises :class:`~topology.errors.StoreError`, as in Kafka.
        """
        try:
            for proc in self.processors.values():
                proc.close()
            for store in self.stores.values():
                close = getattr(store, "close", None)
                if close is not None:
                    close()
        finally:
            try:
                self.state.close()
            finally:
                self.spill_state.close()
