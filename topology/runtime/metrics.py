"""Task metrics: dropped records with reasons, record lateness, suppression gauges.

Every dropped record is counted (``dropped-records-total``) and logged in Kafka's words at
DEBUG; a WARNING summary (records dropped per node and reason) is logged at the first drop and
then at most once per :data:`SUMMARY_INTERVAL_S`, so a stream of late records does not flood
the log and none goes unnoticed.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ("SUMMARY_INTERVAL_S", "DropReason", "TaskMetrics", "log")

log = logging.getLogger("topology")

SUMMARY_INTERVAL_S = 60.0
"""The least time (s, of the metrics' clock) between two WARNING summaries of drops."""


class DropReason:
    """Why a record was dropped (the suffix of ``dropped-records-total{reason=...}``)."""

    NULL_KEY = "null-key"
    NULL_VALUE = "null-value"
    EXPIRED_WINDOW = "expired-window"
    OUT_OF_ORDER = "out-of-order-update"
    """An out-of-order update of a versioned table reaching a join or a re-grouping."""
    EXPIRED_VERSION = "expired-version"
    """A write to a versioned store older than its history retention allows."""


class TaskMetrics:
    """Counters of one task. ``dropped-records-total`` counts every drop, once per reason."""

    __slots__ = ("dropped", "lateness_n", "lateness_sum", "lateness_max", "suppressors",
                 "versioned_stores", "late_observer", "_unreported", "_reported_at", "_clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """:param clock: seconds, for spacing the WARNING summaries of drops."""
        self.dropped: Counter[str] = Counter()
        self._unreported: Counter[tuple[str, str]] = Counter()
        """Drops per (node, reason) since the last summary."""
        self._reported_at = float("-inf")
        self._clock = clock
        self.lateness_n = 0
        """Records whose lateness was recorded (the task updates these three inline)."""
        self.lateness_sum = 0
        self.lateness_max = 0
        self.suppressors: dict[str, object] = {}
        self.versioned_stores: list[object] = []
        """Versioned stores: each counts the writes it rejected (``dropped_records``)."""
        self.late_observer: Callable[[Any, int, int, int, int], None] | None = None
        """Told ``(key, timestamp, start, end, stream_time)`` of every (record, closed window)
        drop, while a test driver records its timeline (``None``, the default: nothing)."""

    def drop(self, reason: str, n: int = 1, node: str | None = None) -> None:
        """Count ``n`` dropped records for ``reason`` at ``node`` (``None``: not known).

        Logs the WARNING summary when one is due (see the module docstring).
        """
        self.dropped[reason] += n
        self._unreported[(node or "?", reason)] += n
        now = self._clock()
        if now - self._reported_at >= SUMMARY_INTERVAL_S:
            self._reported_at = now
            self._summarize()

    def _summarize(self) -> None:
        """One WARNING line: the drops since the last one, per node and reason."""
        counts, self._unreported = self._unreported, Counter()
        total = sum(counts.values())
        parts = ", ".join(f"{n} {reason} at {node}"
                          for (node, reason), n in sorted(counts.items()))
        log.warning("dropped %d record%s since the last summary: %s (dropped-records-total "
                    "counts them; each one is logged at DEBUG)", total,
                    "" if total == 1 else "s", parts)

    def as_dict(self) -> dict[str, float]:
        """All metrics by name: totals, per-reason drops, lateness, suppression gauges.

        Suppression metrics appear summed over nodes under Kafka's names, and per node as
        ``<metric>{node=<name>}``.
        """
        dropped = self.dropped.copy()
        expired = sum(store.dropped_records  # type: ignore[attr-defined]
                      for store in self.versioned_stores)
        if expired:
            dropped[DropReason.EXPIRED_VERSION] += expired
        out: dict[str, float] = {"dropped-records-total": float(sum(dropped.values()))}
        for reason, n in sorted(dropped.items()):
            out[f"dropped-records-total{{reason={reason}}}"] = float(n)
        if self.lateness_n:
            out["record-lateness-avg"] = self.lateness_sum / self.lateness_n
            out["record-lateness-max"] = float(self.lateness_max)
        else:
            out["record-lateness-avg"] = 0.0
            out["record-lateness-max"] = 0.0
        totals: dict[str, float] = {}
        per_node = {node: m.as_dict() for node, m in self.suppressors.items()}  # type: ignore[attr-defined]
        for node, metrics in per_node.items():
            for name, value in metrics.items():
                out[f"{name}{{node={node}}}"] = value
                if name.endswith(("-avg",)):
                    continue
                if name.endswith("-max"):
                    totals[name] = max(totals.get(name, 0.0), value)
                else:
                    totals[name] = totals.get(name, 0.0) + value
        if len(per_node) == 1:  # one node: its -avg figures are the totals' too
            (metrics,) = per_node.values()
            totals.update(metrics)
        for name in ("suppression-emit-total", "suppression-buffer-size",
                     "suppression-buffer-count"):
            out[name] = totals.get(name, 0.0)
        out.update({k: v for k, v in totals.items() if k not in out})
        return out
