"""Stateless processors: sources, sinks, record-by-record stream operators, user processors."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from suppress.entry import RecordContext

from ...errors import InvalidTimestampError, StoreError
from ...record import Record
from ...serde import Serde, serializer_of
from ..api import Processor, PunctuationType
from ..definitions import Sink
from ..processor import Forward, InternalProcessor
from .table import log_null_key

if TYPE_CHECKING:
    from ..task import Task

__all__ = (
    "FilterProcessor",
    "FlatMapProcessor",
    "FlatMapValuesProcessor",
    "MapProcessor",
    "MapValuesProcessor",
    "PassThrough",
    "PeekProcessor",
    "SelectKeyProcessor",
    "SinkProcessor",
    "TableSourceWithoutStore",
    "UserProcessorAdapter",
    "invalid_timestamp",
)

LONG_MAX = 2**63 - 1


class PassThrough(InternalProcessor):
    """Forwards every record unchanged.

    Sources, ``merge``, and the filter in front of a repartition sink: Kafka 3.7+ builds that
    filter with a predicate that is always true, so ``None`` keys pass on to the aggregation
    behind the topic, which drops and counts them.
    """


class TableSourceWithoutStore(InternalProcessor):
    """A table source that nothing materialized (Kafka's ``KTableSource`` without a store).

    Drops (and counts) a ``None`` key; forwards every other record as ``Change(value, None)``:
    without a store there is no old value, and nothing downstream asked for one.
    """

    def init(self, task: Any) -> None:
        """Bind the task for drop counting."""
        self._task = task

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward the record as a table update, or drop it for its ``None`` key."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        self.forward_change(key, value, None, ctx)


class FilterProcessor(InternalProcessor):
    """Keeps records for which ``predicate(key, value)`` is true (false with ``negate``)."""

    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool) -> None:
        self._predicate = predicate
        self._negate = negate

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward the record if it passes."""
        if bool(self._predicate(key, value)) is not self._negate:
            self.forward(key, value, ctx)


class MapProcessor(InternalProcessor):
    """``mapper(key, value) -> (new_key, new_value)``."""

    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self._mapper = mapper

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward the mapped pair."""
        result = self._mapper(key, value)
        if not isinstance(result, tuple) or len(result) != 2:
            raise TypeError(f"map() mapper must return a (key, value) tuple, got {result!r}")
        self.forward(result[0], result[1], ctx)


class MapValuesProcessor(InternalProcessor):
    """``mapper(value) -> new_value``."""

    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self._mapper = mapper

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward the mapped value."""
        self.forward(key, self._mapper(value), ctx)


class FlatMapProcessor(InternalProcessor):
    """``mapper(key, value) -> iterable of (key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]]) -> None:
        self._mapper = mapper

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward each produced pair."""
        for pair in self._mapper(key, value):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(f"flat_map() mapper must yield (key, value) tuples, got {pair!r}")
            self.forward(pair[0], pair[1], ctx)


class FlatMapValuesProcessor(InternalProcessor):
    """``mapper(value) -> iterable of values``."""

    def __init__(self, mapper: Callable[[Any], Iterable[Any]]) -> None:
        self._mapper = mapper

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward each produced value under the same key."""
        for new_value in self._mapper(value):
            self.forward(key, new_value, ctx)


class SelectKeyProcessor(InternalProcessor):
    """``mapper(key, value) -> new_key``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self._mapper = mapper

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward under the new key."""
        self.forward(self._mapper(key, value), value, ctx)


class PeekProcessor(InternalProcessor):
    """Calls ``action(key, value)`` and forwards the record unchanged."""

    def __init__(self, action: Callable[[Any, Any], None]) -> None:
        self._action = action

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Run the action, then forward."""
        self._action(key, value)
        self.forward(key, value, ctx)


def sink_definition(topic: str, key_serde: Serde[Any] | None = None,
                    value_serde: Serde[Any] | None = None) -> Sink:
    """The definition of a node writing to ``topic`` with the ``Produced`` serdes given."""
    return Sink(create=lambda: SinkProcessor(topic, key_serde, value_serde), topic=topic,
                key_serde=key_serde, value_serde=value_serde)


class SinkProcessor(InternalProcessor):
    """Writes records to a topic, serialized with the ``Produced`` serdes when given.

    A record's timestamp must be a valid Kafka timestamp, an int in ``[0, 2**63 - 1]`` ms:
    anything else raises :class:`~topology.errors.InvalidTimestampError` naming this node, as
    Kafka's record collector refuses it.
    """

    def __init__(self, topic: str, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None) -> None:
        self.topic = topic
        self._key_serde = key_serde
        self._value_serde = value_serde
        # the serdes' serialize functions (a built-in's with its common case first)
        self._key_ser = None if key_serde is None else serializer_of(key_serde)
        self._value_ser = None if value_serde is None else serializer_of(value_serde)

    @property
    def key_serde(self) -> Serde[Any] | None:
        """The ``Produced`` key serde (``None``: the key is written as the object)."""
        return self._key_serde

    @property
    def value_serde(self) -> Serde[Any] | None:
        """The ``Produced`` value serde (``None``: the value is written as the object)."""
        return self._value_serde

    def init(self, task: Task) -> None:
        """Resolve the topic name and bind the task's producer for it."""
        self._produce = task.producer_for(task.resolve_topic(self.topic))

    def record_entry(self) -> Forward:
        """Without serdes, a check of the timestamp and the producer; else :meth:`process`."""
        if self._key_serde is not None or self._value_serde is not None:
            return self.process
        produce = self._produce
        name = self.name

        def write(key: Any, value: Any, ctx: RecordContext) -> None:
            ts = ctx[0]
            if type(ts) is not int or not 0 <= ts <= LONG_MAX:
                raise invalid_timestamp(name, ts)
            produce(key, value, ctx)

        return write

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Check the timestamp, serialize, and hand the record to the task's producer."""
        ts = ctx[0]
        if type(ts) is not int or not 0 <= ts <= LONG_MAX:
            raise invalid_timestamp(self.name, ts)
        kb = None if self._key_ser is None else self._key_ser(key)
        vb = None if self._value_ser is None else self._value_ser(value)
        self._produce(key, value, ctx, kb, vb)


def invalid_timestamp(node: str, timestamp: Any) -> InvalidTimestampError:
    """The error for a record reaching sink ``node`` with an invalid timestamp."""
    return InvalidTimestampError(
        f"sink {node} got a record with timestamp {timestamp!r}: a timestamp must be an int "
        f"of ms in [0, {LONG_MAX}] (a processor upstream forwarded it)")


class _Context:
    """The :class:`~topology.runtime.api.ProcessorContext` given to one user processor."""

    def __init__(self, adapter: UserProcessorAdapter, task: Task) -> None:
        self._adapter = adapter
        self._task = task

    def forward(self, record: Record) -> None:
        if not isinstance(record, Record):
            raise TypeError(f"forward() takes a Record, got {type(record).__name__}")
        current = self._adapter.current
        if current is None:
            ctx = RecordContext(record.timestamp, -1, "", 0, record.headers)
        else:
            ctx = current._replace(timestamp=record.timestamp, headers=record.headers)
        self._adapter.forward(record.key, record.value, ctx)

    def get_state_store(self, name: str) -> Any:
        if name not in self._adapter.store_names:
            raise StoreError(
                f"store {name!r} is not connected to processor {self._adapter.name!r}; "
                f"pass its name to process(..., {name!r})"
            )
        return self._task.public_store(name)

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType,
                 callback: Callable[[int], None]) -> Any:
        return self._task.schedule(interval_ms, punctuation_type, callback)

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.clock.now_ms()

    @property
    def topic(self) -> str:
        current = self._adapter.current
        return "" if current is None else current.topic

    @property
    def offset(self) -> int:
        current = self._adapter.current
        return -1 if current is None else current.offset


class UserProcessorAdapter(InternalProcessor):
    """Runs a user :class:`~topology.runtime.api.Processor` inside the runtime."""

    def __init__(self, supplier: Callable[[], Processor], store_names: tuple[str, ...]) -> None:
        self._supplier = supplier
        self.store_names = store_names
        self.current: RecordContext | None = None
        """Context of the record being processed; ``None`` inside punctuations."""

    def init(self, task: Task) -> None:
        """Create the user processor, bind its ``context``, then call its ``init``.

        The context is bound before ``init`` runs, so a processor that overrides ``init``
        (or ``__init__``) without calling the base class's still has ``self.context``.
        """
        processor = self._supplier()
        if not isinstance(processor, Processor):
            raise TypeError(
                f"process() supplier must return a topology Processor, got "
                f"{type(processor).__name__}"
            )
        self._processor = processor
        context = _Context(self, task)
        processor.context = context
        processor.init(context)

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Hand the record to the user processor."""
        self.current = ctx
        self._processor.process(Record(key, value, ctx.timestamp, ctx.headers))
        self.current = None

    def close(self) -> None:
        """Close the user processor."""
        self._processor.close()
