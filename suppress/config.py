"""Suppression configuration: :class:`Suppressed` and :class:`BufferConfig`.

Buffer configurations come in two kinds, as in Kafka Streams. *Strict* configs never emit a
result early (they are unbounded, shut down, or spill to disk when full); only they can be used
for final results (:meth:`Suppressed.until_window_closes`). *Eager* configs emit the oldest
entries early when the buffer is full; they suit rate limiting
(:meth:`Suppressed.until_time_limit`).

>>> cfg = BufferConfig.max_records(100).emit_early_when_full()
>>> cfg.is_strict, cfg.records_limit, cfg.bytes_limit
(False, 100, None)
>>> Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final").name
'final'
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass, replace
from typing import Self

from .errors import InvalidSuppressionError
from .time import to_millis

__all__ = (
    "BufferConfig",
    "BufferFullStrategy",
    "EagerBufferConfig",
    "StrictBufferConfig",
    "Suppressed",
)


class BufferFullStrategy(enum.Enum):
    """What a bounded buffer does when a put takes it over a limit."""

    EMIT = "emit"
    """Emit the oldest entries (by buffer time, then key bytes) until within bounds."""
    SHUT_DOWN = "shut_down"
    """Raise :class:`~suppress.errors.BufferFullError`; the record stays buffered."""
    SPILL_TO_DISK = "spill_to_disk"
    """Keep the limits in memory and move the overflow to an on-disk tier ordered the same
    way (strict: the output is that of an unbounded buffer)."""


def _check_limit(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}: {value!r}")
    if value < 0:
        raise InvalidSuppressionError(f"{what} must not be negative, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """Bounds of a suppression buffer and what to do when a put exceeds them.

    ``records_limit`` counts distinct buffered keys; ``bytes_limit`` counts Kafka's estimate
    of an entry's size (see ``suppress.buffer``). ``None`` means no limit. A buffer is *over*
    a limit when ``count > records_limit`` or ``bytes > bytes_limit`` (strictly greater).

    Build one with the class methods :meth:`max_records`, :meth:`max_bytes` or
    :meth:`unbounded`, then refine it with the ``with_*`` and ``*_when_full`` methods; each
    returns a new value.
    """

    records_limit: int | None = None
    bytes_limit: int | None = None
    strategy: BufferFullStrategy = BufferFullStrategy.SHUT_DOWN

    @property
    def is_strict(self) -> bool:
        """True when the config never emits early (usable for final results)."""
        return self.strategy is not BufferFullStrategy.EMIT

    @property
    def is_bounded(self) -> bool:
        """True when a records or bytes limit is set."""
        return self.records_limit is not None or self.bytes_limit is not None

    @classmethod
    def max_records(cls, n: int) -> EagerBufferConfig:
        """A buffer of at most ``n`` distinct keys that emits early when full.

        :raises TypeError: if ``n`` is not an int.
        :raises InvalidSuppressionError: if ``n`` is negative.
        """
        return EagerBufferConfig(_check_limit(n, "max_records"), None, BufferFullStrategy.EMIT)

    @classmethod
    def max_bytes(cls, n: int) -> EagerBufferConfig:
        """A buffer of at most ``n`` bytes (Kafka's size estimate) that emits early when full.

        :raises TypeError: if ``n`` is not an int.
        :raises InvalidSuppressionError: if ``n`` is negative.
        """
        return EagerBufferConfig(None, _check_limit(n, "max_bytes"), BufferFullStrategy.EMIT)

    @classmethod
    def unbounded(cls) -> StrictBufferConfig:
        """A buffer with no limit (strict: it can never be full)."""
        return StrictBufferConfig(None, None, BufferFullStrategy.SHUT_DOWN)

    def with_max_records(self, n: int) -> Self:
        """Same config (same kind) with the records limit set to ``n``; strategy kept.

        :raises TypeError: if ``n`` is not an int.
        :raises InvalidSuppressionError: if ``n`` is negative.
        """
        return replace(self, records_limit=_check_limit(n, "max_records"))

    def with_max_bytes(self, n: int) -> Self:
        """Same config (same kind) with the bytes limit set to ``n``; strategy kept.

        :raises TypeError: if ``n`` is not an int.
        :raises InvalidSuppressionError: if ``n`` is negative.
        """
        return replace(self, bytes_limit=_check_limit(n, "max_bytes"))

    def with_no_bound(self) -> StrictBufferConfig:
        """A strict config without limits (Kafka's ``withNoBound()``)."""
        return StrictBufferConfig(None, None, BufferFullStrategy.SHUT_DOWN)

    def emit_early_when_full(self) -> EagerBufferConfig:
        """Same limits; when full, emit the oldest entries early (an *eager* config)."""
        return EagerBufferConfig(self.records_limit, self.bytes_limit, BufferFullStrategy.EMIT)

    def shut_down_when_full(self) -> StrictBufferConfig:
        """Same limits; when full, raise :class:`~suppress.errors.BufferFullError` (strict)."""
        return StrictBufferConfig(
            self.records_limit, self.bytes_limit, BufferFullStrategy.SHUT_DOWN
        )

    def spill_to_disk_when_full(self) -> StrictBufferConfig:
        """Same limits, now bounding the memory tier; the overflow goes to disk (strict).

        Nothing is emitted early and nothing fails: entries beyond ``records_limit`` or
        ``bytes_limit`` move to an on-disk tier ordered the same way, so the output is
        exactly that of an unbounded buffer while at most the limits stay in memory (see
        :mod:`suppress.spill`). Kafka Streams designed this strategy and never shipped it.

        >>> cfg = BufferConfig.max_records(10_000).spill_to_disk_when_full()
        >>> cfg.is_strict, cfg.strategy.name
        (True, 'SPILL_TO_DISK')
        """
        return StrictBufferConfig(
            self.records_limit, self.bytes_limit, BufferFullStrategy.SPILL_TO_DISK
        )


@dataclass(frozen=True, slots=True)
class StrictBufferConfig(BufferConfig):
    """A buffer config that never emits early; accepted by ``until_window_closes``."""


@dataclass(frozen=True, slots=True)
class EagerBufferConfig(BufferConfig):
    """A buffer config that emits the oldest entries early when full."""


@dataclass(frozen=True, slots=True)
class Suppressed:
    """What a ``suppress(...)`` node holds back, and for how long.

    Create one with :meth:`until_window_closes` (one final result per window) or
    :meth:`until_time_limit` (at most one update per key per time limit), and optionally
    :meth:`with_name`.

    ``time_limit_ms`` is ``None`` for final results: their delay is the grace period of the
    windowed aggregation upstream, found when the topology is built.
    """

    buffer_config: BufferConfig
    time_limit_ms: int | None
    name: str | None = None
    idle_close_ms: int | None = None
    """With :meth:`with_idle_close`: how long (ms of wall-clock time) without input before
    this suppression's stream time follows the wall clock; ``None``: never (Kafka)."""

    @property
    def final_results(self) -> bool:
        """True for ``until_window_closes`` (tombstones dropped, window-end buffer time)."""
        return self.time_limit_ms is None

    @staticmethod
    def until_window_closes(buffer_config: StrictBufferConfig) -> Suppressed:
        """Emit only the final result of each window, when the window closes.

        Window ``[start, end)`` with grace ``g`` is emitted during the processing of the first
        record that takes this node's stream time ``T`` to ``T >= end + g``. Timeline for
        size 10, grace 5::

            ts:  3   9   12   14 | 15
                 [0,10) updates     T=15 -> [0,10) emitted with count 2 and timestamp 9

        :raises InvalidSuppressionError: for an eager (emit-early) config, which could emit a
            non-final result.
        :raises TypeError: if ``buffer_config`` is not a :class:`BufferConfig`.
        """
        if not isinstance(buffer_config, BufferConfig):
            raise TypeError(
                f"until_window_closes() needs a BufferConfig, got {type(buffer_config).__name__}"
            )
        if not buffer_config.is_strict:
            raise InvalidSuppressionError(
                "until_window_closes() needs a strict buffer config (unbounded(), "
                "shut_down_when_full() or spill_to_disk_when_full()): an emit-early config "
                "would emit a window before it closes, which is not a final result"
            )
        return Suppressed(buffer_config, None)

    @staticmethod
    def until_time_limit(
        time_to_wait_for_more_events: int | _dt.timedelta, buffer_config: BufferConfig
    ) -> Suppressed:
        """Hold each key's updates for ``time_to_wait_for_more_events`` ms of stream time.

        The timer starts with the first update of a key and is *not* restarted by later
        updates; the key is emitted, with its latest value, timestamp and headers, once
        ``first_ts <= T - d``. ``d == 0`` passes every record through. Tombstones are kept.
        Timeline for ``d = 10``::

            ts:  0 (a=1)   4 (a=2)   9 (b=1)   10 (c=1)
                                                -> a=2 emitted with timestamp 4

        :raises TypeError: for a duration that is neither int nor timedelta, or a config that
            is not a :class:`BufferConfig`.
        :raises ValueError: for a negative duration.
        """
        if not isinstance(buffer_config, BufferConfig):
            raise TypeError(
                f"until_time_limit() needs a BufferConfig, got {type(buffer_config).__name__}"
            )
        return Suppressed(buffer_config, to_millis(time_to_wait_for_more_events, "time limit"))

    def with_idle_close(self, idle: int | _dt.timedelta) -> Suppressed:
        """Same suppression, whose stream time follows the wall clock once idle for ``idle`` ms.

        Kafka's suppression (and this one by default) emits only while records arrive: the
        last windows stay buffered until a later record moves stream time. With idle close,
        once no record has reached this suppression for ``idle`` ms of wall-clock time, its
        stream time becomes ``T_last + (W - W_last)``, where ``T_last`` is its stream time
        after the last record and ``W - W_last`` the wall-clock time since that record
        arrived, and it keeps following the wall clock until the next record; whatever is due
        at that stream time is emitted then, as a record would have emitted it. Nothing
        happens before the first record (stream time unknown). Timeline, windows of 10 ms,
        grace 5, ``with_idle_close(3_000)``; the last record (ts 9) arrives at wall time
        ``w``::

            wall  w+2000: idle 2000 < 3000               nothing
            wall  w+3000: idle 3000, T = 9 + 3000 >= 15   [0,10) emitted

        For final results, the windowed aggregation upstream moves to the same stream time,
        so a record arriving later for a window already emitted is dropped as late (counted,
        and routed to ``late_records_to`` when set) rather than emitted a second time. The
        runtime checks idleness when its wall clock advances (the test driver:
        ``advance_wall_clock_time``).

        :raises TypeError: for a duration that is neither int nor timedelta.
        :raises ValueError: for a negative duration.
        """
        return replace(self, idle_close_ms=to_millis(idle, "idle close period"))

    def with_name(self, name: str) -> Suppressed:
        """Same suppression with the processor named ``name`` (store: ``<name>-store``).

        :raises TypeError: if ``name`` is not a non-empty str.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"suppression name must be a non-empty str, got {name!r}")
        return replace(self, name=name)
