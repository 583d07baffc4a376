"""A naive reference model of a versioned store: the rules written as plainly as possible.

Per key, one list of ``(timestamp, operation, value)`` sorted by timestamp, never expired
physically; every read applies the rules of ``docs/versioned.md`` directly, without sharing
code with :mod:`topology.state.versioned`. Slow on purpose (linear scans everywhere); it is
the oracle of :func:`topology.testing.contracts.check_versioned_store` and of the
property tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...state.api import (
    PUT_RETURN_CODE_NOT_PUT,
    Operation,
    VersionedRecord,
    VersionEntry,
)

__all__ = ("VersionedModel",)

PUT, DELETE, PURGE = Operation.PUT, Operation.DELETE, Operation.PURGE
FOREVER = 2**63 - 1


class VersionedModel:
    """The reference: same public methods as a store, for the keyword options the checks use.

    ``events`` lists, in order, the :class:`VersionEntry` every watcher without filters
    would have received for each accepted write.
    """

    def __init__(self, history_retention_ms: int, max_versions: int | None = None,
                 key_serializer: Callable[[Any], bytes] = str.encode) -> None:
        self.hr = history_retention_ms
        self.max_versions = max_versions
        self.key_bytes = key_serializer
        self.observed = -1
        self.dropped = 0
        self.versions: dict[Any, list[tuple[int, Operation, Any]]] = {}
        self.events: list[VersionEntry] = []

    # -- rules ---------------------------------------------------------------------------------

    def cutoff(self) -> int:
        return self.observed - self.hr

    def valid_to(self, key: Any, timestamp: int) -> int | None:
        later = [t for t, _, _ in self.versions.get(key, []) if t > timestamp]
        return min(later) if later else None

    def visible(self, key: Any, version: tuple[int, Operation, Any]) -> bool:
        timestamp, operation, _ = version
        if operation is PUT:
            valid_to = self.valid_to(key, timestamp)
            return valid_to is None or valid_to > self.cutoff()
        return timestamp >= self.cutoff()

    def record(self, key: Any, version: tuple[int, Operation, Any]) -> VersionedRecord:
        return VersionedRecord(version[2], version[0], self.valid_to(key, version[0]))

    def entry(self, key: Any, version: tuple[int, Operation, Any]) -> VersionEntry:
        timestamp, operation, value = version
        return VersionEntry(key, value, timestamp, self.valid_to(key, timestamp), operation)

    def latest(self, key: Any) -> tuple[int, Operation, Any] | None:
        versions = self.versions.get(key)
        return versions[-1] if versions else None

    def too_old(self, timestamp: int) -> bool:
        return timestamp < self.cutoff()

    def store(self, key: Any, timestamp: int, operation: Operation, value: Any,
              counted: bool = True) -> int:
        """Insert or replace; apply max_versions; return put's code (events recorded)."""
        versions = [v for v in self.versions.get(key, []) if v[0] != timestamp]
        versions.append((timestamp, operation, value))
        versions.sort(key=lambda v: v[0])
        if self.max_versions is not None and len(versions) > self.max_versions:
            dropped = versions[:len(versions) - self.max_versions]
            versions = versions[len(versions) - self.max_versions:]
            if any(v[0] == timestamp for v in dropped):
                self.dropped += counted
                self.observed = max(self.observed, timestamp)
                return PUT_RETURN_CODE_NOT_PUT
        self.versions[key] = versions
        self.observed = max(self.observed, timestamp)
        valid_to = self.valid_to(key, timestamp)
        if counted:
            self.events.append(VersionEntry(key, value, timestamp, valid_to, operation))
        return -1 if valid_to is None else valid_to

    # -- Kafka's operations ------------------------------------------------------------------

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        if self.too_old(timestamp):
            self.dropped += 1
            return PUT_RETURN_CODE_NOT_PUT
        return self.store(key, timestamp, PUT if value is not None else DELETE, value)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        if self.too_old(timestamp):
            self.dropped += 1
            return None
        before = self.get(key, timestamp)
        if self.store(key, timestamp, DELETE, None) == PUT_RETURN_CODE_NOT_PUT:
            return None
        return before

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        latest = self.latest(key)
        if as_of is None or as_of < self.cutoff():
            if latest is None or latest[1] is not PUT:
                return None
            if as_of is not None and latest[0] > as_of:
                return None
            return self.record(key, latest)
        candidates = [v for v in self.versions.get(key, []) if v[0] <= as_of]
        if not candidates or candidates[-1][1] is not PUT:
            return None
        return self.record(key, candidates[-1])

    def get_versions(self, key: Any, from_time: int | None = None, to_time: int | None = None,
                     descending: bool = False) -> list[VersionedRecord]:
        lo = 0 if from_time is None else from_time
        hi = FOREVER if to_time is None else to_time
        if hi < self.cutoff():
            latest = self.latest(key)
            if latest is not None and latest[1] is PUT and latest[0] <= hi:
                return [self.record(key, latest)]
            return []
        out = []
        for version in self.versions.get(key, []):
            if version[1] is not PUT or not self.visible(key, version):
                continue
            valid_to = self.valid_to(key, version[0])
            if version[0] <= hi and (valid_to is None or valid_to > lo):
                out.append(self.record(key, version))
        return out[::-1] if descending else out

    def restore(self, records: list[tuple[Any, Any, int]]) -> None:
        for key, value, timestamp in records:
            if self.too_old(timestamp):
                continue
            self.store(key, timestamp, PUT if value is not None else DELETE, value,
                       counted=False)

    # -- extras --------------------------------------------------------------------------------

    def history(self, key: Any, newest_first: bool = True, include_deletes: bool = False
                ) -> list[VersionEntry]:
        out = [self.entry(key, v) for v in self.versions.get(key, [])
               if self.visible(key, v) and (include_deletes or v[1] is PUT)]
        return out[::-1] if newest_first else out

    def purge(self, key: Any, timestamp: int) -> bool:
        if self.too_old(timestamp):
            self.dropped += 1
            return False
        self.versions[key] = [(timestamp, PURGE, None)]
        self.observed = max(self.observed, timestamp)
        self.events.append(VersionEntry(key, None, timestamp, None, PURGE))
        return True

    def create(self, key: Any, value: Any, timestamp: int) -> bool:
        if self.too_old(timestamp):
            self.dropped += 1
            return False
        latest = self.latest(key)
        if latest is not None and (latest[1] is PUT or latest[0] > timestamp):
            return False
        return self.store(key, timestamp, PUT, value) != PUT_RETURN_CODE_NOT_PUT

    def update(self, key: Any, value: Any, timestamp: int, expected_timestamp: int) -> bool:
        if self.too_old(timestamp):
            self.dropped += 1
            return False
        latest = self.latest(key)
        if (latest is None or latest[1] is not PUT or latest[0] != expected_timestamp
                or timestamp < expected_timestamp):
            return False
        return self.store(key, timestamp, PUT, value) != PUT_RETURN_CODE_NOT_PUT

    def sorted_keys(self, from_key: Any = None, to_key: Any = None) -> list[Any]:
        lo = None if from_key is None else self.key_bytes(from_key)
        hi = None if to_key is None else self.key_bytes(to_key)
        return [k for k in sorted(self.versions, key=self.key_bytes)
                if (lo is None or self.key_bytes(k) >= lo)
                and (hi is None or self.key_bytes(k) <= hi)]

    def keys(self) -> list[Any]:
        return [k for k in self.sorted_keys() if self.versions[k][-1][1] is PUT]

    def range(self, from_key: Any = None, to_key: Any = None
              ) -> list[tuple[Any, VersionedRecord]]:
        return [(k, self.record(k, self.versions[k][-1]))
                for k in self.sorted_keys(from_key, to_key) if self.versions[k][-1][1] is PUT]

    def reverse_range(self, from_key: Any = None, to_key: Any = None
                      ) -> list[tuple[Any, VersionedRecord]]:
        return self.range(from_key, to_key)[::-1]

    def scan_versions(self, from_key: Any = None, to_key: Any = None, since: int | None = None,
                      limit_per_key: int | None = None, include_deletes: bool = False
                      ) -> list[VersionEntry]:
        out: list[VersionEntry] = []
        for key in self.sorted_keys(from_key, to_key):
            entries = [e for e in self.history(key, True, include_deletes)
                       if since is None or e.timestamp >= since]
            out += entries if limit_per_key is None else entries[:limit_per_key]
        return out

    def state(self) -> dict[str, Any]:
        """Everything observable about the whole store, for end-of-run comparisons."""
        return {
            "keys": self.keys(),
            "range": self.range(),
            "history": {k: self.history(k, include_deletes=True) for k in self.sorted_keys()
                        if self.history(k, include_deletes=True)},
            "versions": {k: self.get_versions(k) for k in self.sorted_keys()},
            "dropped": self.dropped,
            "observed": self.observed,
        }
