"""Output records: how the runtime holds what sinks write, and how it is read back.

:func:`holder` keeps each record a sink writes as a flat tuple; :class:`OutputTopicReader`
reads them back as :class:`TestRecord` objects, through serdes or as produced. The test
driver's output topics and the Spark runner's memory sink are both readers; the runner's
sinks receive lists of :class:`TestRecord`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, final

from suppress.entry import RecordContext

from ..errors import EmptyTopicError
from ..record import Headers, normalize_headers
from ..serde import (
    Serde,
    deserialize_from_topic,
    deserialize_produced,
    many_deserializer_of,
    reads_back_as_written,
)
from ..windows import LONG_MAX, Window, Windowed

__all__ = ("OutputTopicReader", "ReadBackChecks", "TestRecord", "holder", "plain_records",
           "read_back_checks")

_new_tuple = tuple.__new__  # a Windowed of a key and a Window, without its __new__


def holder(queue_append: Callable[[], Callable[[Any], None]]) -> Callable[..., None]:
    """The producer that keeps one topic's records for its :class:`TestOutputTopic`.

    ``queue_append()`` gives the append of the topic's queue, created at the first record
    (the topic exists from then on). Each record is kept as a flat tuple ``(key, value,
    timestamp, headers, key_bytes, value_bytes)``, a :class:`~topology.Windowed` key as its
    parts ``(key, ..., value_bytes, start, end)``: the garbage collector stops tracking a
    tuple of plain values, so a million waiting records cost it nothing (a context or a named
    tuple inside would keep each one tracked, and scanned by every full collection). Reading
    rebuilds the key.
    """
    append: Callable[[Any], None] | None = None

    def hold(key: Any, value: Any, ctx: RecordContext, key_bytes: bytes | None = None,
             value_bytes: bytes | None = None) -> None:
        nonlocal append
        if append is None:
            append = queue_append()
        if type(key) is Windowed:
            window = key[1]
            if type(window) is Window and type(window[0]) is int and type(window[1]) is int:
                append((key[0], value, ctx[0], ctx[4], key_bytes, value_bytes,
                        window[0], window[1]))  # a Window of two ints: its parts
                return
        append((key, value, ctx[0], ctx[4], key_bytes, value_bytes))

    return hold


ReadBackChecks = tuple[Callable[[list[Any]], bool] | None, Callable[[list[Any]], bool] | None]
"""For the key and the value of a topic's records: ``None`` where the reader takes the
object as written (no serde), else a check of :func:`~topology.serde.reads_back_as_written`."""


def read_back_checks(writers: list[tuple[Any, Any]], key_serde: Serde[Any] | None,
                     value_serde: Serde[Any] | None) -> ReadBackChecks | None:
    """How records that ``writers`` wrote can be read through the serdes without their bytes.

    ``writers``: the ``(key serde, value serde)`` of each sink that wrote them. ``None`` if
    some part must be read from its bytes: no writers, or a writer and the reader that do
    not share a check.
    """
    if not writers:
        return None
    checks: list[Callable[[list[Any]], bool] | None] = []
    for part, reader in ((0, key_serde), (1, value_serde)):
        if reader is None:
            checks.append(None)
            continue
        found = {reads_back_as_written(serdes[part], reader) for serdes in writers}
        if None in found or len(found) != 1:
            return None
        checks.append(found.pop())
    return checks[0], checks[1]


def _windowed(key: Any, start: int, end: int) -> Windowed:
    """A windowed key the driver held as its parts."""
    return Windowed(key, Window(start, end))


def plain_records(queue: Iterable[tuple[Any, ...]]) -> list[TestRecord]:
    """Records held by the driver, as produced (no serdes); windowed keys rebuilt."""
    new = object.__new__
    out: list[TestRecord] = []
    append = out.append
    windows: dict[tuple[int, int], Window] = {}  # one Window object per window
    for item in queue:
        record = new(TestRecord)  # as TestRecord._of, without a call per record
        if len(item) == 6:
            record.key = item[0]
        else:
            bounds = item[6:]
            window = windows.get(bounds)
            if window is None:
                window = windows[bounds] = Window(*bounds)
            record.key = _new_tuple(Windowed, (item[0], window))
        record.value = item[1]
        record.timestamp = item[2]
        record.headers = item[3]
        append(record)
    return out


@final
class TestRecord:
    """A record piped into or read from a test topic.

    ``timestamp`` is in ms (``None``: none given); ``headers`` a tuple of ``(str, bytes)``.
    Equal when key, value, timestamp and headers are equal.

    :raises ValueError: for a timestamp outside Kafka's range, ``[0, 2**63 - 1]``.
    """

    __test__ = False  # not a pytest test class
    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key: Any, value: Any, timestamp: int | None = None,
                 headers: Iterable[tuple[str, bytes | None]] | None = None) -> None:
        if timestamp is not None:
            if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                raise TypeError(f"timestamp must be an int of ms, got {timestamp!r}")
            if timestamp < 0:
                raise ValueError(f"Invalid timestamp: {timestamp}. Timestamp should always be "
                                 "non-negative or null.")
            if timestamp > LONG_MAX:
                raise ValueError(f"Invalid timestamp: {timestamp}. A timestamp is at most "
                                 f"{LONG_MAX} ms (Kafka's largest, a signed 64-bit long).")
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers: Headers = normalize_headers(headers)

    @classmethod
    def _of(cls, key: Any, value: Any, timestamp: int, headers: Headers) -> TestRecord:
        """A record from values the runtime already validated (no checks, no copies)."""
        record = object.__new__(cls)
        record.key = key
        record.value = value
        record.timestamp = timestamp
        record.headers = headers
        return record

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TestRecord):
            return NotImplemented
        return (self.key, self.value, self.timestamp, self.headers) == (
            other.key, other.value, other.timestamp, other.headers)

    def __hash__(self) -> int:
        return hash((self.key, self.value, self.timestamp, self.headers))

    def __repr__(self) -> str:
        return (f"TestRecord(key={self.key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp!r}, headers={self.headers!r})")



class OutputTopicReader(ABC):
    """Reads the records held for one topic, first in first out.

    A driver's output topic and the Spark runner's memory sink are both readers. Without
    serdes, records come back as the objects the topology produced; with them, deserialized
    from the bytes the sink wrote. A subclass says where the records are held
    (:meth:`_queue`) and which serdes wrote them (:meth:`_written_checks`).
    """

    def __init__(self, name: str, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None) -> None:
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._plain = key_serde is None and value_serde is None

    @abstractmethod
    def _queue(self) -> deque[Any] | None:
        """The held records (``None``: nothing was ever written)."""

    def _convert(self, item: tuple[Any, ...]) -> TestRecord:
        key, value, timestamp, headers, kb, vb = item[:6]
        if len(item) == 8:
            key = _windowed(key, item[6], item[7])
        if self._plain:
            return TestRecord._of(key, value, timestamp, headers)
        name = self.name
        if self._key_serde is not None:
            key = (deserialize_from_topic(self._key_serde, kb, name, "key") if kb is not None
                   else deserialize_produced(self._key_serde, key, name, "key"))
        if self._value_serde is not None:
            value = (deserialize_from_topic(self._value_serde, vb, name, "value")
                     if vb is not None
                     else deserialize_produced(self._value_serde, value, name, "value"))
        return TestRecord(key, value, timestamp, headers)

    def read_record(self) -> TestRecord:
        """The next record.

        :raises topology.errors.EmptyTopicError: ``Uninitialized topic: <t>`` if nothing was
            ever written, ``Empty topic: <t>`` if everything was read.
        """
        queue = self._queue()
        if queue is None:
            raise EmptyTopicError(f"Uninitialized topic: {self.name}")
        if not queue:
            raise EmptyTopicError(f"Empty topic: {self.name}")
        return self._convert(queue.popleft())

    def read_value(self) -> Any:
        """The next record's value (errors as :meth:`read_record`)."""
        return self.read_record().value

    def read_key_value(self) -> tuple[Any, Any]:
        """The next record as ``(key, value)`` (errors as :meth:`read_record`)."""
        record = self.read_record()
        return record.key, record.value

    def read_records_to_list(self) -> list[TestRecord]:
        """Every unread record (an empty list if none)."""
        queue = self._queue()
        if not queue:
            return []
        if self._plain:  # the objects as produced: one loop, no per-record method call
            out = plain_records(queue)
        else:
            items = list(queue)
            read = self._read_written(items)
            if read is None:
                read = self._read_all(items)
            out = read if read is not None else [self._convert(item) for item in items]
        queue.clear()
        return out

    def _read_written(self, items: list[tuple[Any, ...]]) -> list[TestRecord] | None:
        """The records as written, where this topic's serdes would read back just those.

        Only when every sink writing the topic used built-in serdes that this topic's serdes
        read back unchanged (:func:`~topology.serde.reads_back_as_written`) and the check
        says the written keys and values do; ``None`` otherwise. Not for a durable driver,
        whose topics may hold records a former topology wrote.
        """
        checks = self._written_checks()
        if checks is None:
            return None
        records = plain_records(items)
        key_check, value_check = checks
        if key_check is not None and not key_check([r.key for r in records]):
            return None
        if value_check is not None and not value_check([r.value for r in records]):
            return None
        return records

    def _written_checks(self) -> ReadBackChecks | None:
        """:func:`read_back_checks` of the sinks that write this topic (``None``: read bytes)."""
        return None

    def _read_all(self, items: list[tuple[Any, ...]]) -> list[TestRecord] | None:
        """:meth:`_convert` of every item, each part read by its serde at once.

        Only where each serde has a reader of many (:func:`~topology.serde.
        many_deserializer_of`, built-ins that run no user code) and every item is plain
        (bytes written by the sink, a valid timestamp); ``None`` otherwise, or if a reader
        fails, and then the items are converted one by one, which raises the first error.
        """
        key_serde, value_serde = self._key_serde, self._value_serde
        many_keys = None if key_serde is None else many_deserializer_of(key_serde)
        many_values = None if value_serde is None else many_deserializer_of(value_serde)
        if (key_serde is not None and many_keys is None) or (
                value_serde is not None and many_values is None):
            return None
        timestamps = [item[2] for item in items]
        if items and (set(map(type, timestamps)) != {int} or min(timestamps) < 0):
            return None
        try:
            if many_keys is None:
                keys = [item[0] if len(item) == 6 else _windowed(item[0], item[6], item[7])
                        for item in items]
            else:
                keys = many_keys([item[4] for item in items])
            values = ([item[1] for item in items] if many_values is None
                      else many_values([item[5] for item in items]))
        except Exception:  # noqa: BLE001 - one by one, the serde raises its own error
            return None
        of = TestRecord._of
        return [of(key, value, item[2], normalize_headers(item[3]) if item[3] else ())
                for key, value, item in zip(keys, values, items, strict=True)]

    def read_values_to_list(self) -> list[Any]:
        """Every unread value."""
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        """Every unread record as ``(key, value)``."""
        return [(r.key, r.value) for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """Every unread record into a dict, last value per key winning (``None`` kept).

        :raises ValueError: on a ``None`` key (records before it are consumed).
        """
        out: dict[Any, Any] = {}
        queue = self._queue()
        while queue:
            record = self._convert(queue.popleft())
            if record.key is None:
                raise ValueError("Null keys not allowed with read_key_values_to_map")
            out[record.key] = record.value
        return out

    def queue_size(self) -> int:
        """Number of unread records."""
        queue = self._queue()
        return 0 if queue is None else len(queue)

    def is_empty(self) -> bool:
        """True when there is nothing to read."""
        return self.queue_size() == 0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}[topic='{self.name}', keySerde={self._key_serde}, "
                f"valueSerde={self._value_serde}, size={self.queue_size()}]")
