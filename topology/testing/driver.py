"""``TopologyTestDriver``: run a topology in-process, synchronously and deterministically."""

from __future__ import annotations

import datetime as _dt
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from suppress.entry import Headers
from suppress.time import NO_TIMESTAMP, to_millis

from ..runtime.clock import MockClock, SystemClock
from ..runtime.graph import Topology
from ..runtime.task import Task
from ..serde import Serde
from .topics import TestInputTopic, TestOutputTopic, holder

__all__ = ("SuppressionBuffer", "TopologyTestDriver")

DEFAULT_APPLICATION_ID = "topology-test-driver-app"

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

    :param config: ``application_id`` (prefix of internal topic names; default
        ``"topology-test-driver-app"``) and ``metrics_recording_level`` (``"INFO"``, the
        default, or ``"DEBUG"``, which adds Kafka's sampled ``suppression-buffer-*-avg/-max``
        and keeps buffer sizes up to date on every put).
    :param initial_wall_clock_ms: start of the mock wall clock (default: now).
    """

    def __init__(self, topology: Topology, config: Mapping[str, Any] | None = None,
                 initial_wall_clock_ms: int | None = None) -> None:
        if not isinstance(topology, Topology):
            raise TypeError(f"TopologyTestDriver needs a Topology (StreamsBuilder.build()), "
                            f"got {type(topology).__name__}")
        config = dict(config or {})
        unknown = set(config) - {"application_id", "metrics_recording_level"}
        if unknown:
            raise ValueError(f"unknown driver config keys: {sorted(unknown)}")
        self.application_id = str(config.get("application_id", DEFAULT_APPLICATION_ID))
        level = config.get("metrics_recording_level", "INFO")
        if level not in ("INFO", "DEBUG"):
            raise ValueError(f"metrics_recording_level must be 'INFO' or 'DEBUG', got {level!r}")
        start = SystemClock().now_ms() if initial_wall_clock_ms is None else initial_wall_clock_ms
        self._clock = MockClock(start)
        self._outputs: dict[str, deque[Any]] = {}
        self._task = Task(topology, self._clock, self._capture, self.application_id,
                          debug_metrics=level == "DEBUG")
        self._consumed: dict[str, tuple[Serde[Any] | None, Serde[Any] | None]] = {}
        for node in topology.nodes:
            consumed = getattr(node, "consumed", None)
            if node.kind == "source" and consumed is not None:
                for topic in node.topics:
                    self._consumed[self._task.resolve_topic(topic)] = (
                        consumed.key_serde, consumed.value_serde)
        self._closed = False

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
        return TestInputTopic(self, name, key_serde, value_serde, start, auto_advance_ms)

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
        """Names of the stores (suppression buffers included) that were ever written."""
        task = self._task
        written = [name for name, store in task.stores.items() if store.written]
        for node, engine in self._suppressions().values():
            reached = engine.stream_time != NO_TIMESTAMP
            parent = node.parents[0]
            if not reached and parent.name in task.fused:
                # fused with its windowed aggregation: every record that got a window
                # written reached the buffer
                reached = any(task.stores[s].written for s in parent.stores)
            if reached:
                written.append(node.stores[0])
        return written

    def _suppressions(self) -> dict[str, tuple[Any, Any]]:
        """Suppression buffer store name -> (its graph node, its suppression engine)."""
        task = self._task
        return {node.stores[0]: (node, task.suppressors[node.name])
                for node in task.topology.nodes if node.name in task.suppressors}

    def _pipe(self, topic: str, key: Any, value: Any, timestamp: int, headers: Headers,
              key_serialized: bool, value_serialized: bool) -> None:
        if self._closed:
            raise RuntimeError("the driver is closed")
        serdes = self._consumed.get(topic)
        if serdes is not None:
            key_serde, value_serde = serdes
            if key_serialized and key_serde is not None:
                key = key_serde.deserialize(key)
            if value_serialized and value_serde is not None:
                value = value_serde.deserialize(value)
        self._task.process(topic, key, value, timestamp, headers)

    def _pipe_batch(self, topic: str, records: Any, other: Callable[[Any], None]) -> None:
        """Process records in order: plain ``(key, value, timestamp)`` tuples in bulk.

        Anything else goes to ``other(record)`` in its turn.
        """
        if self._closed:
            raise RuntimeError("the driver is closed")
        self._task.process_batch(topic, records, other)

    def _capture(self, topic: str) -> Callable[..., None]:
        """The function that keeps what sinks write to ``topic``, in order, until read."""
        outputs = self._outputs
        return holder(lambda: outputs.setdefault(topic, deque()).append)

    # -- time ----------------------------------------------------------------------------------

    def advance_wall_clock_time(self, duration: int | _dt.timedelta) -> None:
        """Move the mock wall clock forward and run due wall-clock punctuations.

        Suppressions never emit on wall-clock time (Kafka's behaviour).

        :raises ValueError: for a negative duration.
        """
        self._clock.advance(to_millis(duration, "wall-clock advance"))
        self._task.wall_clock_advanced()

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
        if kind is not None:
            return self._task.stores[name]
        found = self._suppressions().get(name)
        return None if found is None else SuppressionBuffer(name, found[1])

    def _store_of_kind(self, name: str, kind: str) -> Any:
        if self._task.store_kind(name) != kind:
            return None
        return self._task.stores[name]

    def get_key_value_store(self, name: str) -> Any:
        """The key-value store ``name``, or ``None`` if missing or of another kind."""
        return self._store_of_kind(name, "key-value")

    def get_window_store(self, name: str) -> Any:
        """The window store ``name``, or ``None`` if missing or of another kind."""
        return self._store_of_kind(name, "window")

    def get_session_store(self, name: str) -> Any:
        """The session store ``name``, or ``None`` if missing or of another kind."""
        return self._store_of_kind(name, "session")

    def get_versioned_key_value_store(self, name: str) -> Any:
        """The versioned store ``name``, or ``None`` if missing or of another kind."""
        return self._store_of_kind(name, "versioned")

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
        """Close the task. Buffered suppressed records are not emitted (as Kafka)."""
        if not self._closed:
            self._closed = True
            self._task.close()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class SuppressionBuffer:
    """A read-only view of a suppression's buffer store (from ``driver.get_state_store``).

    Kafka's counterpart is the ``InMemoryTimeOrderedKeyValueChangeBuffer`` store; this view
    offers its name and size figures, read from the suppression's metrics.
    """

    persistent = False

    def __init__(self, name: str, engine: Any) -> None:
        self.name = name
        self._metrics = engine.metrics

    @property
    def num_records(self) -> int:
        """Entries buffered now."""
        return int(self._metrics.as_dict()["suppression-buffer-count"])

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffered entries, in bytes."""
        return int(self._metrics.as_dict()["suppression-buffer-size"])

    def __repr__(self) -> str:
        return f"SuppressionBuffer({self.name!r}, num_records={self.num_records})"
