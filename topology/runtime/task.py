"""A task: runs one topology instance to completion for each input record.

One task, one partition per topic, as Kafka's test driver. Records produced to a topic that a
source of the same topology reads (repartition topics, or a user's loop) are queued and
processed, in order, before :meth:`Task.process` returns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from suppress.entry import Headers, RecordContext
from suppress.time import NO_TIMESTAMP

from ..errors import StoreError, UnknownTopicError
from .api import PunctuationType
from .clock import Clock
from .graph import InternalProcessor, Topology
from .metrics import TaskMetrics

__all__ = ("Task",)

_new_tuple = tuple.__new__  # builds RecordContext without its Python-level __new__

Produce = Callable[..., None]
"""``produce(key, value, ctx, key_bytes=None, value_bytes=None)``: one record written to a
topic; the bytes are given when the sink serialized the record."""
Output = Callable[[str], Produce]
"""``output(topic)`` gives the function that receives what sinks write to ``topic``."""


class _Schedule:
    """One punctuation: aligned to its start, at most one call per advance."""

    __slots__ = ("next_time", "interval", "callback", "cancelled")

    def __init__(self, start: int, interval: int, callback: Callable[[int], None]) -> None:
        self.next_time = start
        self.interval = interval
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Stop this punctuation."""
        self.cancelled = True

    def maybe_fire(self, now: int) -> None:
        if self.cancelled or now < self.next_time:
            return
        self.callback(now)
        scheduled = self.next_time
        nxt = scheduled + self.interval
        if now >= nxt:
            nxt = scheduled + ((now - scheduled) // self.interval + 1) * self.interval
        self.next_time = nxt


class Task:
    """Processors, stores and clocks of one running topology.

    :param output: ``output(topic)`` returns the function that receives every record written
        to ``topic``, called as ``(key, value, context, key_bytes=None, value_bytes=None)``.
    :param debug_metrics: record DEBUG-level metrics (suppression buffer size/count samples).
    """

    def __init__(self, topology: Topology, clock: Clock, output: Output,
                 application_id: str, debug_metrics: bool = False) -> None:
        self.topology = topology
        self.application_id = application_id
        self.debug_metrics = debug_metrics
        self.clock = clock
        self.metrics = TaskMetrics()
        self.stream_time = NO_TIMESTAMP
        self.suppressors: dict[str, Any] = {}
        self.fused: dict[str, Any] = {}
        """Aggregation node name -> its fused final-results step (see :meth:`_fuse`)."""
        self.stores = {spec.name: spec.factory() for spec in topology.stores}
        self._store_kinds = {spec.name: spec.kind for spec in topology.stores}
        self._output = output
        self._queue: deque[tuple[str, Any, Any, int, Headers]] = deque()
        self._offsets: dict[str, int] = {}  # next offset per topic, piped or re-queued
        self._stream_schedules: list[_Schedule] = []
        self._wall_schedules: list[_Schedule] = []
        self.processors: dict[str, InternalProcessor] = {}
        for node in topology.nodes:
            proc = node.factory()
            proc.name = node.name
            self.processors[node.name] = proc
        self.sources: dict[str, InternalProcessor] = {}
        for node in topology.nodes:
            if node.kind == "source":
                for topic in node.topics:
                    self.sources[self.resolve_topic(topic)] = self.processors[node.name]
        # Parents first, as Kafka (the order of user processors' init and of their
        # punctuations): init, where a node may install a specialised ``process``; fusion;
        # then forwards wired to the children's final entry points; then ``connected``,
        # where a node may bind its forwards into a helper.
        for node in topology.nodes:
            self.processors[node.name].init(self)
        for node in topology.nodes:
            if len(node.children) == 1:
                self._fuse(node.name, self.processors[node.name],
                           self.processors[node.children[0].name])
        for node in topology.nodes:
            proc = self.processors[node.name]
            children = [self.processors[c.name] for c in node.children]
            proc.forward = _fan_out([c.process for c in children])  # type: ignore[method-assign]
            proc.forward_change = _fan_out(  # type: ignore[method-assign]
                [c.process_change for c in children])
        for proc in self.processors.values():
            proc.connected()
        # each source topic's entry point; those that take raw records need no context object
        self._entries = {topic: source.forward for topic, source in self.sources.items()}
        self._raw_topics = {topic for topic, forward in self._entries.items()
                            if getattr(forward, "accepts_raw", False)}

    def _fuse(self, name: str, parent: InternalProcessor, child: InternalProcessor) -> None:
        """Fuse a windowed aggregation with a final-results suppression, its only child.

        Both then run as one step, with the same results (processors/fused.py).
        """
        from .processors.fused import FusedFinalResults, can_fuse

        if can_fuse(parent, child, self.debug_metrics):
            fused = self.fused[name] = FusedFinalResults(parent, child)  # type: ignore[arg-type]
            parent.process = fused.step()  # type: ignore[method-assign]

    def resolve_topic(self, topic: str) -> str:
        """The real name of ``topic``: internal topics get the application id as prefix."""
        if topic in self.topology.internal_topics:
            return f"{self.application_id}-{topic}"
        return topic

    # -- processing ----------------------------------------------------------------------------

    def process(self, topic: str, key: Any, value: Any, timestamp: int,
                headers: Headers = ()) -> None:
        """Process one input record to completion (re-queued internal records included).

        Offsets per input topic start at 0 and go up by one per record.

        :raises UnknownTopicError: if no source reads ``topic``.
        """
        self._process_one(topic, key, value, timestamp, headers)
        if self._queue:
            self._drain()

    def _process_one(self, topic: str, key: Any, value: Any, timestamp: int,
                     headers: Headers) -> None:
        """One record through the topology: offset, stream time, lateness, punctuation."""
        forward = self._entries.get(topic)
        if forward is None:
            raise UnknownTopicError(f"Unknown topic: {topic}")
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
        if not headers and topic in self._raw_topics:
            forward(key, value, timestamp, offset, topic)  # builds a context only if needed
        else:
            forward(key, value, _new_tuple(RecordContext, (timestamp, offset, topic, 0, headers)))
        if self._stream_schedules:
            self._punctuate_stream_time()

    def process_batch(self, topic: str, records: Iterable[Any],
                      other: Callable[[Any], None]) -> None:
        """Process records in order, each to completion.

        Plain ``(key, value, timestamp)`` tuples are processed as :meth:`process` would, with
        the per-record overhead hoisted out of the loop; anything else (a ``TestRecord``, a
        tuple with headers) is handed to ``other(record)`` in its turn.

        :raises UnknownTopicError: if no source reads ``topic``.
        :raises ValueError: for a timestamp that is not a non-negative int; the records
            before it have been processed.
        """
        forward = None  # resolved at the first plain record: piping nothing is not an error
        raw = False
        metrics = self.metrics
        queue = self._queue
        schedules = self._stream_schedules
        offsets = self._offsets
        offset = offsets.get(topic, 0)
        stream_time = self.stream_time
        late_n = late_sum = late_max = 0
        try:
            for record in records:
                if type(record) is not tuple or len(record) != 3 or type(record[2]) is not int \
                        or record[2] < 0:
                    offsets[topic] = offset
                    try:
                        other(record)  # a TestRecord, headers, or a bad timestamp (raises)
                    finally:
                        offset = offsets[topic]
                        stream_time = self.stream_time
                    continue
                key, value, ts = record
                if forward is None:
                    forward = self._entry(topic)
                    raw = topic in self._raw_topics
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
                if raw:  # the step builds a context only if it needs one
                    forward(key, value, ts, this_offset, topic)
                else:
                    forward(key, value, _new_tuple(RecordContext, (ts, this_offset, topic, 0, ())))
                if schedules or queue:
                    offsets[topic] = offset  # the next offset, for records queued to this topic
                    try:
                        if schedules:
                            self._punctuate_stream_time()
                        if queue:
                            self._drain()
                    finally:
                        offset = offsets[topic]
                        stream_time = self.stream_time
        finally:
            offsets[topic] = offset
            metrics.lateness_n += late_n
            metrics.lateness_sum += late_sum
            if late_max > metrics.lateness_max:
                metrics.lateness_max = late_max

    def _entry(self, topic: str) -> Callable[..., None]:
        """Where records of ``topic`` enter: its source's children (sources pass through)."""
        forward = self._entries.get(topic)
        if forward is None:
            raise UnknownTopicError(f"Unknown topic: {topic}")
        return forward

    def _drain(self) -> None:
        """Process records written to topics this topology reads, in the order written.

        A queued record gets its offset when it is processed; as processing is synchronous
        and first in first out, that is the order it was written in.
        """
        queue = self._queue
        while queue:
            self._process_one(*queue.popleft())

    def _punctuate_stream_time(self) -> None:
        for schedule in list(self._stream_schedules):
            schedule.maybe_fire(self.stream_time)

    def producer_for(self, topic: str) -> Produce:
        """The function a sink writing ``topic`` calls for each record.

        Records are delivered to the output; those written to a topic that a source of this
        topology reads are also queued and processed before the current input returns.
        """
        deliver = self._output(topic)
        if topic not in self.sources:
            return deliver
        queue = self._queue

        def produce(key: Any, value: Any, ctx: RecordContext, key_bytes: bytes | None = None,
                    value_bytes: bytes | None = None) -> None:
            deliver(key, value, ctx, key_bytes, value_bytes)
            queue.append((topic, key, value, ctx.timestamp, ctx.headers))

        return produce

    # -- punctuation ---------------------------------------------------------------------------

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType,
                 callback: Callable[[int], None]) -> _Schedule:
        """Schedule ``callback(now_ms)`` every ``interval_ms`` of the given clock.

        Stream-time schedules are aligned to 0 and fire at the first record; wall-clock ones
        first fire ``interval_ms`` after scheduling. Skipped intervals give one call.

        :raises ValueError: for an interval that is not positive.
        """
        if not isinstance(interval_ms, int) or interval_ms <= 0:
            raise ValueError(f"punctuation interval must be a positive int of ms, "
                             f"got {interval_ms!r}")
        if punctuation_type is PunctuationType.STREAM_TIME:
            schedule = _Schedule(0, interval_ms, callback)
            self._stream_schedules.append(schedule)
        else:
            schedule = _Schedule(self.clock.now_ms() + interval_ms, interval_ms, callback)
            self._wall_schedules.append(schedule)
        return schedule

    def wall_clock_advanced(self) -> None:
        """Run due wall-clock punctuations, then anything they queued."""
        now = self.clock.now_ms()
        for schedule in list(self._wall_schedules):
            schedule.maybe_fire(now)
        self._drain()

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
        """Close every processor (buffered suppress records are not emitted)."""
        for proc in self.processors.values():
            proc.close()


def _fan_out(children: list[Callable[..., None]]) -> Callable[..., None]:
    """One function calling every child with the same arguments (the child itself if one)."""
    if not children:
        return _discard
    if len(children) == 1:
        return children[0]
    kids = tuple(children)

    def forward(*args: Any) -> None:
        for child in kids:
            child(*args)

    return forward


def _discard(*args: Any) -> None:
    """Forward target of a node without children."""
