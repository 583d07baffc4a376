"""Test topics of :class:`~topology.testing.driver.TopologyTestDriver`.

:class:`TestRecord` lives in :mod:`topology.runtime.outputs` (the Spark runner's sinks take
it too) and is importable from here and from :mod:`topology`.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..runtime.outputs import (
    OutputTopicReader,
    ReadBackChecks,
    TestRecord,
    holder,
    read_back_checks,
)
from ..serde import Serde
from ..windows import LONG_MAX

if TYPE_CHECKING:
    from .driver import TopologyTestDriver

__all__ = ("TestInputTopic", "TestOutputTopic", "TestRecord", "holder", "read_back_checks")


class TestInputTopic:
    """Pipes records into one source topic. Get one from ``driver.create_input_topic``.

    Records without a timestamp get the topic's current time, which then moves forward by
    ``auto_advance_ms``.

    Kafka's ``pipeInput(V)`` (a value with a ``None`` key) is :meth:`pipe_value` here, so
    that :meth:`pipe_input` keeps its ``(key, value, timestamp, headers)`` signature.
    """

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, start_ms: int, auto_advance_ms: int) -> None:
        self.name = name
        self._driver = driver
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._time = start_ms
        self._advance = auto_advance_ms
        self._plain = key_serde is None and value_serde is None
        self._process = driver._task.process

    def advance_time(self, ms: int) -> None:
        """Move this topic's current time forward (not stream or wall-clock time).

        :raises ValueError: for a negative advance.
        """
        if ms < 0:
            raise ValueError("advance must be positive")
        self._time += ms

    def pipe_input(self, key: Any, value: Any, timestamp: int | None = None,
                   headers: Iterable[tuple[str, bytes | None]] | None = None) -> None:
        """Process one record to completion.

        :raises ValueError: for a timestamp outside [0, 2**63 - 1] (the task keeps running).
        :raises topology.errors.UnknownTopicError: if no source reads this topic.
        :raises suppress.BufferFullError: if a shut-down suppression overflows.
        """
        if (self._plain and headers is None and type(timestamp) is int
                and 0 <= timestamp <= LONG_MAX and not self._driver._closed):
            self._process(self.name, key, value, timestamp)  # nothing to convert or check
            return
        self.pipe_record(TestRecord(key, value, timestamp, headers))

    def pipe_value(self, value: Any, timestamp: int | None = None,
                   headers: Iterable[tuple[str, bytes | None]] | None = None) -> None:
        """Process one record with a ``None`` key (Kafka's ``pipeInput(V)``).

        Errors as :meth:`pipe_input`.
        """
        self.pipe_record(TestRecord(None, value, timestamp, headers))

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]], start: int | None = None,
                            advance: int | _dt.timedelta | None = None) -> None:
        """Process ``(key, value)`` pairs one after the other (each to completion).

        Without ``start``, each record gets the topic's time, moved by its auto-advance
        (Kafka's ``pipeKeyValueList(list)``). With ``start`` (ms), the records get ``start``,
        ``start + advance``, ... (``advance`` in ms or a ``timedelta``, default 0) and the
        topic's time does not change (``pipeKeyValueList(list, start, advance)``).

        :raises ValueError: for ``advance`` without ``start``, or a timestamp that comes out
            negative (the records before it have been processed).
        :raises TypeError: for a ``start`` or ``advance`` of another type.
        """
        for (key, value), ts in zip(pairs, self._times(start, advance), strict=False):
            self.pipe_record(TestRecord(key, value, ts))

    def pipe_value_list(self, values: Iterable[Any], start: int | None = None,
                        advance: int | _dt.timedelta | None = None) -> None:
        """:meth:`pipe_key_value_list` for values, each with a ``None`` key.

        Kafka's ``pipeValueList``; timestamps and errors as :meth:`pipe_key_value_list`.
        """
        for value, ts in zip(values, self._times(start, advance), strict=False):
            self.pipe_record(TestRecord(None, value, ts))

    @staticmethod
    def _times(start: int | None, advance: int | _dt.timedelta | None) -> Iterator[int | None]:
        """Timestamps of a piped list: ``None`` (the topic's time) or ``start + i*advance``."""
        if start is None:
            if advance is not None:
                raise ValueError("advance needs start: without start, records get the "
                                 "topic's time and its auto-advance")
            return itertools.repeat(None)
        if not isinstance(start, int) or isinstance(start, bool):
            raise TypeError(f"start must be an int of ms, got {start!r}")
        if isinstance(advance, _dt.timedelta):
            step = advance // _dt.timedelta(milliseconds=1)
        elif advance is None or (isinstance(advance, int) and not isinstance(advance, bool)):
            step = advance or 0
        else:
            raise TypeError(f"advance must be an int of ms or a timedelta, got {advance!r}")
        return itertools.count(start, step)

    def pipe_record(self, record: TestRecord) -> None:
        """Process one :class:`TestRecord` to completion."""
        ts = record.timestamp
        if ts is None:
            ts = self._time
            self._time += self._advance
        key, value = record.key, record.value
        if self._key_serde is not None:
            key = self._key_serde.serialize(key)
        if self._value_serde is not None:
            value = self._value_serde.serialize(value)
        self._driver._pipe(self.name, key, value, ts, record.headers,
                           self._key_serde is not None, self._value_serde is not None)

    def pipe_records(self, records: Iterable[TestRecord | tuple[Any, ...]]) -> None:
        """Process records one after the other (each to completion).

        Each item is a :class:`TestRecord` or a tuple ``(key, value)`` /
        ``(key, value, timestamp)`` / ``(key, value, timestamp, headers)``.
        """
        # the bulk path: plain (key, value, timestamp) tuples skip per-record objects
        self._driver._pipe_batch(self.name, records, self._pipe_other, self._key_serde,
                                 self._value_serde)

    def _pipe_other(self, record: TestRecord | tuple[Any, ...]) -> None:
        self.pipe_record(record if isinstance(record, TestRecord) else TestRecord(*record))

    def __repr__(self) -> str:
        return (f"TestInputTopic[topic='{self.name}', keySerde={self._key_serde}, "
                f"valueSerde={self._value_serde}]")



class TestOutputTopic(OutputTopicReader):
    """Reads what the topology wrote to one topic, first in first out.

    Get one from ``driver.create_output_topic``. Without serdes, records come back as the
    objects the topology produced; with them, deserialized from the bytes the sink wrote.
    """

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None) -> None:
        super().__init__(name, key_serde, value_serde)
        self._driver = driver

    def _queue(self) -> deque[Any] | None:
        return self._driver._outputs.get(self.name)

    def _written_checks(self) -> ReadBackChecks | None:
        """:func:`read_back_checks` of the sinks that write this topic (``None``: read bytes)."""
        return self._driver._read_back_checks(self.name, self._key_serde, self._value_serde)
