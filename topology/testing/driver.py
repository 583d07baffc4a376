"""``TopologyTestDriver``: run a topology in-process, synchronously and deterministically."""

from __future__ import annotations

import datetime as _dt
import functools
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, cast

from suppress.entry import Headers
from suppress.processor import SuppressionView
from suppress.time import NO_TIMESTAMP, to_millis

from ..errors import IllegalStateError, UnknownTopicError
from ..runtime.clock import SystemClock
from ..runtime.engine import DEFAULT_APPLICATION_ID, Engine
from ..runtime.task import (
    DEFAULT_COMMIT_INTERVAL_RECORDS,
    DEFAULT_MAX_FEEDBACK_RECORDS,
    InputCodec,
    TaskFailure,
)
from ..serde import (
    Serde,
    deserialize_from_topic,
    round_trip_keeps_of,
    round_trip_of,
    serializer_of,
)
from ..state.api import KeyValueStore, SessionStore, VersionedKeyValueStore, WindowStore
from ..topology import Topology
from .clock import MockClock
from .timeline import Recorder, Timeline
from .topics import ReadBackChecks, TestInputTopic, TestOutputTopic, read_back_checks

__all__ = ("SuppressionBuffer", "TopologyTestDriver")

_CONFIG_KEYS = frozenset({"application_id", "metrics_recording_level", "fuse_final_results",
                          "max_feedback_records", "commit_interval_records", "auto_commit",
                          "record_timeline"})
_USER_META = b"user."
"""Prefix of the meta entries committed through :meth:`TopologyTestDriver.commit`."""

_GETTERS = {
    "versioned": ("versioned key-value", "get_versioned_key_value_store"),
    "key-value": ("key-value", "get_key_value_store"),
    "window": ("window", "get_window_store"),
    "session": ("session", "get_session_store"),
}
"""Built-in store kinds: the name Kafka's message gives them, and their typed getter."""


class TopologyTestDriver:
    """Runs a :class:`~topology.Topology` as one task with one partition per topic.

    Every ``pipe_input`` processes its record to completion (records written to internal
    repartition topics included) before it returns. Wall-clock time is a mock clock that moves
    only through :meth:`advance_wall_clock_time`.

    :param config: a mapping of

        - ``application_id``: prefix of internal topic names (default
          ``"topology-test-driver-app"``);
        - ``metrics_recording_level``: ``"INFO"`` (the default) or ``"DEBUG"``, which adds
          Kafka's sampled ``suppression-buffer-*-avg/-max`` and keeps buffer sizes up to date
          on every put;
        - ``fuse_final_results``: let each windowed aggregation whose only child is a
          final-results suppression hand its changes straight to the suppression's buffer
          by window and key, with no windowed key built per update (default ``True``; same
          results, faster; ``False`` forwards windowed keys from one processor to the
          other);
        - ``max_feedback_records``: the most records one input record may feed back through
          topics the topology reads, sinks writing to its own sources (default 10,000); past
          it the record fails with :class:`~topology.errors.FeedbackLoopError` naming the
          cycle;
        - ``commit_interval_records``: with a ``state_dir``, ``pipe_records`` commits after
          every this many records (default 10,000); every call commits when it returns;
        - ``auto_commit``: ``False`` commits only when :meth:`commit` is called (not after
          each call, not at :meth:`close`), so that a caller can commit a unit of work of its
          own (a Spark micro-batch with its id) atomically (default ``True``);
        - ``record_timeline``: ``True`` records, from the start, what :meth:`timeline` draws
          (default ``False``: nothing is recorded and nothing costs).
    :param state_dir: makes the driver durable, as a Kafka Streams application with
        exactly-once processing: stores default to RocksDB, and every call that pipes input
        or advances time ends with one atomic commit of the stores, the suppression buffers,
        the input offsets, the stream times and the output topics (records produced and read
        positions). A driver created on the same directory continues from the last commit:
        :meth:`committed_offsets` says where to resume piping, and reading an output topic
        returns the records not yet read. The state lives in
        ``<state_dir>/<application_id>/0_0``, created owner-only (0o700); a directory in use
        by another live driver, written by another format version, or not a state directory
        is refused with a clear error. ``None`` (the default): nothing survives the driver;
        on-disk state (spilled buffers, ``persistent=True`` stores) lives in a private
        temporary directory removed by :meth:`close`.
    :param initial_wall_clock_ms: start of the mock wall clock (default: now).
    :raises ValueError: for an unknown config key or an invalid value, or, with a
        ``state_dir``, an ``application_id`` that cannot name a directory.

    **Failure.** An exception while a record is processed (user code, a serde, a full
    ``shut_down_when_full()`` buffer, an invalid timestamp) propagates from the call that
    piped it, with a note naming the node and the record, and fails the driver's task as
    Kafka stops a stream thread: what the record forwarded before the exception stays visible
    (outputs, stores, the buffered entry that overflowed), and every later call that pipes
    input or advances time raises :class:`~topology.errors.TaskFailedError` naming the node
    and the first cause. :attr:`failure` tells what happened; outputs, stores and metrics stay
    readable until :meth:`close`.
    """

    def __init__(self, topology: Topology, config: Mapping[str, Any] | None = None,
                 state_dir: str | os.PathLike[str] | None = None,
                 initial_wall_clock_ms: int | None = None) -> None:
        if not isinstance(topology, Topology):
            raise TypeError(f"TopologyTestDriver needs a Topology (StreamsBuilder.build()), "
                            f"got {type(topology).__name__}")
        config = dict(config or {})
        unknown = set(config) - _CONFIG_KEYS
        if unknown:
            raise ValueError(f"unknown driver config keys: {sorted(unknown)}; known: "
                             f"{sorted(_CONFIG_KEYS)}")
        self.application_id = str(config.get("application_id", DEFAULT_APPLICATION_ID))
        level = config.get("metrics_recording_level", "INFO")
        if level not in ("INFO", "DEBUG"):
            raise ValueError(f"metrics_recording_level must be 'INFO' or 'DEBUG', got {level!r}")
        fuse = config.get("fuse_final_results", True)
        if type(fuse) is not bool:
            raise ValueError(f"fuse_final_results must be True or False, got {fuse!r}")
        auto_commit = config.get("auto_commit", True)
        if type(auto_commit) is not bool:
            raise ValueError(f"auto_commit must be True or False, got {auto_commit!r}")
        self._meta: dict[str, bytes] = {}
        start = SystemClock().now_ms() if initial_wall_clock_ms is None else initial_wall_clock_ms
        self._clock = MockClock(start)
        self._durable = state_dir is not None
        self._engine = Engine(topology, self._clock, self.application_id,
                              debug_metrics=level == "DEBUG", fuse=fuse,
                              max_feedback_records=config.get("max_feedback_records",
                                                              DEFAULT_MAX_FEEDBACK_RECORDS),
                              state_dir=state_dir,
                              commit_interval_records=config.get(
                                  "commit_interval_records", DEFAULT_COMMIT_INTERVAL_RECORDS),
                              auto_commit=auto_commit)
        self._task = self._engine.tasks[0]
        self._outputs = self._engine.outputs
        self._consumed: dict[str, tuple[Serde[Any] | None, Serde[Any] | None]] = {}
        for node in topology.nodes:
            if node.kind == "source" and node.consumed is not None:
                for topic in node.topics:
                    self._consumed[self._task.resolve_topic(topic)] = (
                        node.consumed.key_serde, node.consumed.value_serde)
        record = config.get("record_timeline", False)
        if type(record) is not bool:
            raise ValueError(f"record_timeline must be True or False, got {record!r}")
        self._recorder: Recorder | None = self._new_recorder(topology) if record else None
        self._closed = False

    # -- timeline ------------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        """A picture of the run so far: records per key over event time, stream time, windows.

        Needs ``config={"record_timeline": True}``: the driver then records, from its start,
        each input record (topic, key, timestamp, arrival index, the task's stream time after
        it), each record with a windowed key written to an output topic (window, value, the
        arrival it came with, whether it is a final result: written downstream of a
        suppression) and each record dropped for a closed window (with that window). That is
        one small tuple per input record, windowed output and late drop, and a look at the
        output topics' sizes after each input; a driver without it records nothing.
        ``timeline().save("run.svg")`` draws it (see :class:`~topology.testing.timeline.
        Timeline`); the returned timeline is a snapshot, later records do not change it.

        :raises IllegalStateError: if the driver was created without ``record_timeline``.
        """
        if self._recorder is None:
            raise IllegalStateError("this driver records no timeline: create it with "
                               "config={'record_timeline': True}")
        return Timeline(self._recorder.events)

    def _new_recorder(self, topology: Topology) -> Recorder:
        """A recorder of this driver's task, told of its late drops."""
        task = self._task
        final: dict[str, Any] = {}
        for node in topology.nodes:
            suppressions = [s for s in node.stores if task.store_kind(s) == "suppression-buffer"]
            if not suppressions:
                continue
            below, seen = list(node.children), set()
            while below:  # the topics of the sinks below the suppression
                child = below.pop()
                if id(child) in seen:
                    continue
                seen.add(id(child))
                below.extend(child.children)
                if child.kind == "sink":
                    for topic in child.topics:
                        final.setdefault(task.resolve_topic(topic), task.stores[suppressions[0]])
        internal = [task.resolve_topic(t) for t in topology.internal_topics]
        recorder = Recorder(self._outputs, lambda: task.stream_time, internal, final)
        task.metrics.late_observer = recorder.late
        return recorder

    @staticmethod
    def _recording(recorder: Recorder, topic: str, records: Iterable[Any]) -> Iterator[Any]:
        """``records``, each plain ``(key, value, timestamp)`` one recorded as it goes by.

        Other records reach :meth:`_pipe`, which records them.
        """
        for record in records:
            recorder.finish()  # the record before is processed
            if type(record) is tuple and len(record) == 3 and type(record[2]) is int:
                recorder.begin(topic, record[0], record[2])
            yield record

    # -- topics --------------------------------------------------------------------------------

    def create_input_topic(self, name: str, key_serde: Serde[Any] | None = None,
                           value_serde: Serde[Any] | None = None,
                           start_timestamp_ms: int | None = None,
                           auto_advance_ms: int = 0) -> TestInputTopic:
        """A topic to pipe records into; whether the topology reads it is checked on pipe.

        With serdes, keys and values are serialized here and deserialized by the source's
        ``Consumed`` serdes (as Kafka); without, the objects reach the topology unchanged.

        Records piped without a timestamp get the topic's time: ``start_timestamp_ms``, by
        default the current system time (as Kafka's ``Instant.now()``; not the driver's mock
        wall clock), moved forward by ``auto_advance_ms`` after each of them.

        :raises ValueError: for a negative ``auto_advance_ms``.
        """
        if auto_advance_ms < 0:
            raise ValueError("autoAdvance must be positive")
        start = SystemClock().now_ms() if start_timestamp_ms is None else start_timestamp_ms
        topic = TestInputTopic(self, name, key_serde, value_serde, start, auto_advance_ms)
        if self._recorder is not None:
            topic._process = self._process_recorded  # its fast path, recorded
        return topic

    def create_output_topic(self, name: str, key_serde: Serde[Any] | None = None,
                            value_serde: Serde[Any] | None = None) -> TestOutputTopic:
        """A topic to read what the topology wrote (see :class:`TestOutputTopic`)."""
        return TestOutputTopic(self, name, key_serde, value_serde)

    def produced_topic_names(self) -> set[str]:
        """Every topic written so far: sinks, repartition topics and changelogs.

        Kafka logs every store of a topology (suppression buffers included) to the changelog
        topic ``<application_id>-<store>-changelog``, which exists once the store was first
        written. The stores are asked here, so recording costs nothing per record.
        """
        names = set(self._outputs)
        for store in self._written_stores():
            names.add(f"{self.application_id}-{store}-changelog")
        return names

    def _written_stores(self) -> list[str]:
        """Names of the stores (suppression buffers included) that were ever written.

        A suppression's buffer was written once a record reached the suppression (its
        stream time moved), whichever path runs it.
        """
        task = self._task
        written = []
        for name, store in task.stores.items():
            if task.store_kind(name) == "suppression-buffer":
                if store.stream_time != NO_TIMESTAMP:
                    written.append(name)
            elif store.written:
                written.append(name)
        return written

    def _pipe(self, topic: str, key: Any, value: Any, timestamp: int, headers: Headers,
              key_serialized: bool, value_serialized: bool) -> None:
        if self._closed:
            raise IllegalStateError("the driver is closed")
        serdes = self._consumed.get(topic)
        if serdes is not None:
            key_serde, value_serde = serdes
            try:
                if key_serialized and key_serde is not None:
                    key = deserialize_from_topic(key_serde, key, topic, "key")
                if value_serialized and value_serde is not None:
                    value = deserialize_from_topic(value_serde, value, topic, "value")
            except Exception as exc:
                self._task.fail_on_input(exc, topic, key, value, timestamp)
                self._record_failed(topic, key, timestamp)
                raise
        if self._recorder is None:
            self._task.process(topic, key, value, timestamp, headers)
        else:
            self._process_recorded(topic, key, value, timestamp, headers)

    def _process_recorded(self, topic: str, key: Any, value: Any, timestamp: int,
                          headers: Headers = ()) -> None:
        """``Task.process``, recorded for the timeline."""
        recorder = self._recorder
        assert recorder is not None
        recorder.mark()
        recorder.begin(topic, key, timestamp)
        try:
            self._task.process(topic, key, value, timestamp, headers)
        except UnknownTopicError:
            recorder.abort()
            raise
        finally:
            recorder.finish()

    def _record_failed(self, topic: str, key: Any, timestamp: int) -> None:
        """Record an input its source could not read (it took its offset)."""
        if self._recorder is not None:
            self._recorder.begin(topic, key, timestamp)
            self._recorder.finish()

    def _read_back_checks(self, topic: str, key_serde: Serde[Any] | None,
                          value_serde: Serde[Any] | None) -> ReadBackChecks | None:
        """:func:`~topology.testing.topics.read_back_checks` of the sinks writing ``topic``.

        ``None`` for a durable driver: its topics may hold what a former topology wrote.
        """
        if self._durable:
            return None
        return read_back_checks(self._task.sink_serdes(topic), key_serde, value_serde)

    def _pipe_batch(self, topic: str, records: Any, other: Callable[[Any], None],
                    key_topic_serde: Serde[Any] | None = None,
                    value_topic_serde: Serde[Any] | None = None) -> None:
        """Process records in order: plain ``(key, value, timestamp)`` tuples in bulk.

        Anything else goes to ``other(record)`` in its turn. With the input topic's serdes,
        a plain tuple's key and value are serialized by them and deserialized by the
        source's ``Consumed`` serdes, as :meth:`_pipe` does for one record.
        """
        key_serializer = None if key_topic_serde is None else serializer_of(key_topic_serde)
        value_serializer = (None if value_topic_serde is None
                            else serializer_of(value_topic_serde))
        if self._closed:
            raise IllegalStateError("the driver is closed")
        codec = None
        if key_serializer is not None or value_serializer is not None:
            key_serde, value_serde = self._consumed.get(topic, (None, None))
            key = _steps(key_serializer, key_topic_serde, key_serde, topic, "key")
            value = _steps(value_serializer, value_topic_serde, value_serde, topic, "value")
            codec = InputCodec(key[0], value[0], key[1], value[1], _keeps(key, value))
        recorder = self._recorder
        if recorder is None:
            self._task.process_batch(topic, records, other, codec)
            return
        recorder.mark()
        try:
            self._task.process_batch(topic, self._recording(recorder, topic, records), other, codec)
        except UnknownTopicError:
            recorder.abort()
            raise
        finally:
            recorder.finish()

    # -- durability ----------------------------------------------------------------------------

    def commit(self, meta: Mapping[str, bytes] | None = None) -> None:
        """Commit now, with ``meta`` entries of the caller's (e.g. the last batch processed).

        Unless ``auto_commit`` is off, every call that pipes input or advances time commits
        when it returns; this commits now and adds the caller's entries to that atomic step
        (read them back with :meth:`committed_meta`, after a restart too). Without a
        ``state_dir`` nothing survives the driver: the entries are kept in memory.

        :raises ValueError: for a meta value that is not bytes.
        :raises TaskFailedError: if the task failed (nothing of the failed call is committed).
        """
        if self._closed:
            raise IllegalStateError("the driver is closed")
        entries: dict[bytes, bytes | None] = {}
        for name, value in (meta or {}).items():
            if not isinstance(value, bytes):
                raise ValueError(f"meta {name!r} must be bytes, got {type(value).__name__}")
            entries[_USER_META + name.encode()] = value
        self._engine.commit(entries)
        if not self._task.durable:
            self._meta.update(meta or {})

    def committed_meta(self, name: str) -> bytes | None:
        """The entry ``name`` of the last :meth:`commit` that gave one, ``None`` if none did."""
        if not self._task.durable:
            return self._meta.get(name)
        return self._task.read_meta(_USER_META + name.encode())

    def committed_offsets(self) -> dict[str, int]:
        """For each input topic, how many of its records the last commit covers.

        After a restart, pipe each topic's records from this index on (Kafka's consumer
        resumes at the committed offset). Internal (repartition) topics are not listed.
        """
        internal = {self._task.resolve_topic(t) for t in self._task.topology.internal_topics}
        return {topic: offset for topic, offset in self._task.committed_offsets.items()
                if topic not in internal}

    # -- time ----------------------------------------------------------------------------------

    def advance_wall_clock_time(self, duration: int | _dt.timedelta) -> None:
        """Move the mock wall clock forward and run due wall-clock punctuations.

        Suppressions emit on wall-clock time only with idle close
        (``Suppressed.with_idle_close``); without it, never (Kafka's behaviour).

        :raises ValueError: for a negative duration.
        """
        self._clock.advance(to_millis(duration, "wall-clock advance"))
        if self._recorder is not None:
            self._recorder.mark()
        self._engine.wall_clock_advanced()
        if self._recorder is not None:
            self._recorder.collect()

    # -- stores and metrics --------------------------------------------------------------------

    def get_state_store(self, name: str) -> Any:
        """A store that has no typed getter, by name; ``None`` if there is none.

        As Kafka's ``getStateStore``: a suppression buffer is returned (as a
        :class:`SuppressionBuffer`), while a built-in key-value, window, session or versioned
        store must be read with its typed getter.

        :raises ValueError: for a built-in store, naming its getter (Kafka's
            ``IllegalArgumentException`` message).
        """
        kind = self._task.store_kind(name)
        if kind in _GETTERS:
            label, getter = _GETTERS[kind]
            raise ValueError(f"Store {name} is a {label} store and should be accessed via "
                             f"`{getter}()`")
        if kind == "suppression-buffer":
            return SuppressionBuffer(name, self._task.stores[name])
        return self._task.stores.get(name)

    def _store_of_kind(self, name: str, kind: str) -> Any:
        if self._task.store_kind(name) != kind:
            return None
        return self._task.stores[name]

    def get_key_value_store(self, name: str) -> KeyValueStore[Any, Any] | None:
        """The key-value store ``name``, or ``None`` if missing or of another kind."""
        return cast("KeyValueStore[Any, Any] | None", self._store_of_kind(name, "key-value"))

    def get_window_store(self, name: str) -> WindowStore[Any, Any] | None:
        """The window store ``name``, or ``None`` if missing or of another kind."""
        return cast("WindowStore[Any, Any] | None", self._store_of_kind(name, "window"))

    def get_session_store(self, name: str) -> SessionStore[Any, Any] | None:
        """The session store ``name``, or ``None`` if missing or of another kind."""
        return cast("SessionStore[Any, Any] | None", self._store_of_kind(name, "session"))

    def get_versioned_key_value_store(self, name: str) -> VersionedKeyValueStore | None:
        """The versioned store ``name``, or ``None`` if missing or of another kind."""
        return cast("VersionedKeyValueStore | None", self._store_of_kind(name, "versioned"))

    @property
    def failure(self) -> TaskFailure | None:
        """Why the task failed (node, record, first exception), or ``None`` while it runs."""
        return self._task.failure

    def metrics(self) -> dict[str, float]:
        """Metrics by name, as floats.

        ``dropped-records-total`` (and per reason as ``dropped-records-total{reason=r}``),
        ``record-lateness-avg/max``, ``suppression-emit-total``, ``suppression-buffer-size``,
        ``suppression-buffer-count`` (per node as ``name{node=n}``; ``-avg``/``-max`` too at
        the DEBUG recording level).
        """
        return self._task.metrics.as_dict()

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the task. Buffered suppressed records are not emitted (as Kafka).

        A temporary state directory is removed; one under ``state_dir`` is kept.
        """
        if not self._closed:
            self._closed = True
            try:
                task = self._task
                if task.durable and task.auto_commit and task.failure is None:
                    task.commit()  # a clean close keeps what was read as read
            finally:
                self._engine.close()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


Steps = tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None,
              Callable[[list[Any]], bool] | None]


def _steps(serializer: Callable[[Any], Any] | None, topic_serde: Serde[Any] | None,
           source_serde: Serde[Any] | None, topic: str, part: str) -> Steps:
    """How one part (key or value) of a piped record reaches the source.

    ``(serialize, deserialize, keeps)``: the topic's serializer, then the source's
    deserializer, whose errors name the topic as :meth:`TopologyTestDriver._pipe`'s do.

    When the topic and the source use the same built-in serde with a round trip
    (``round_trip_of``), serializing then deserializing is that one function, with the same
    results and errors, and nothing is left to deserialize; ``keeps(values)`` then tells
    whether it gives back every value of a list itself (``round_trip_keeps_of``).
    ``keeps`` is ``None`` where no such check exists.
    """
    if serializer is None or topic_serde is None:
        return None, None, None
    if source_serde is None:
        return serializer, None, None
    if topic_serde is source_serde:
        round_trip = round_trip_of(topic_serde)
        if round_trip is not None:
            return round_trip, None, round_trip_keeps_of(topic_serde)
    return serializer, functools.partial(deserialize_from_topic, source_serde, topic=topic,
                                         part=part), None


def _keeps(key: Steps, value: Steps) -> Callable[[Sequence[Any]], bool] | None:
    """:attr:`InputCodec.keeps` for records whose key and value take these steps."""
    key_keeps = key[2] if key[0] is not None else None
    value_keeps = value[2] if value[0] is not None else None
    if (key[0] is not None and key_keeps is None) or (
            value[0] is not None and value_keeps is None):
        return None  # a part changes (bytes, or another serde's reading)

    def keeps(records: Sequence[Any]) -> bool:
        if set(map(type, records)) != {tuple}:
            return False  # TestRecords and the like go their own way: not checked here
        try:
            return ((key_keeps is None or key_keeps(list(map(_first, records))))
                    and (value_keeps is None or value_keeps(list(map(_second, records)))))
        except IndexError:  # a tuple too short to be a record
            return False

    return keeps


_first, _second = operator.itemgetter(0), operator.itemgetter(1)


class SuppressionBuffer:
    """A read-only view of a suppression's buffer store (from ``driver.get_state_store``).

    Kafka's counterpart is the ``InMemoryTimeOrderedKeyValueChangeBuffer`` store. The view
    reads the suppression as it runs, handed its changes by window or not: its stream time,
    its size figures and its entries.
    """

    persistent = False

    def __init__(self, name: str, view: SuppressionView) -> None:
        self.name = name
        self._view = view

    @property
    def stream_time(self) -> int:
        """The suppression's own stream time (ms), -1 before any record reached it."""
        return self._view.stream_time

    @property
    def num_records(self) -> int:
        """Entries buffered now."""
        return self._view.num_records

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffered entries, in bytes."""
        return self._view.size_bytes

    def entries(self) -> list[tuple[Any, Any, int]]:
        """``(key, value, timestamp)`` of every buffered entry, in eviction order."""
        return self._view.buffered()

    def __repr__(self) -> str:
        return f"SuppressionBuffer({self.name!r}, num_records={self.num_records})"
