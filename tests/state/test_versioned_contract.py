"""The public contract checker: every registered backend passes; broken backends fail.

Each mutant below is the in-memory store with one plausible bug; the checker must reject
every one of them, naming a check, or it is not checking enough.
"""

from __future__ import annotations

from typing import Any

import pytest

from topology.state.api import PUT_RETURN_CODE_NOT_PUT, VersionedRecord
from topology.state.memory import InMemoryVersionedKeyValueStore
from topology.testing.contracts import check_versioned_store

from .backends import VERSIONED_BACKENDS


@pytest.mark.parametrize("backend", sorted(VERSIONED_BACKENDS))
def test_backend_passes_the_contract(backend: str) -> None:
    names = check_versioned_store(VERSIONED_BACKENDS[backend])
    assert "matches_the_reference_model" in names and len(names) == len(set(names)) >= 15


class GraceBoundaryRejected(InMemoryVersionedKeyValueStore):
    def put(self, key: Any, value: Any, timestamp: int) -> int:
        if timestamp == self._cutoff:
            self._dropped += 1
            return PUT_RETURN_CODE_NOT_PUT
        return super().put(key, value, timestamp)


class KafkaSegmentGap(InMemoryVersionedKeyValueStore):
    """Misses versions whose valid_to lies in a later segment than to_time, as Kafka does."""

    def get_versions(self, key: Any, from_time: int | None = None, to_time: int | None = None,
                     descending: bool = False) -> list[VersionedRecord]:
        records = super().get_versions(key, from_time, to_time, descending)
        if to_time is None:
            return records
        return [r for r in records
                if r.valid_to is None or r.valid_to // self._si <= to_time // self._si]


class IgnoresMaxVersions(InMemoryVersionedKeyValueStore):
    def _drop_oldest(self, key: Any, keep: int) -> int | None:
        return None


class RestoreCountsSkipped(InMemoryVersionedKeyValueStore):
    """Restores through put, which counts (and notifies) what grace rejects."""

    def restore(self, records: Any) -> None:
        for key, value, timestamp in records:
            self.put(key, value, timestamp)


class NotifiesRejectedWrites(InMemoryVersionedKeyValueStore):
    def put(self, key: Any, value: Any, timestamp: int) -> int:
        code = super().put(key, value, timestamp)
        if code == PUT_RETURN_CODE_NOT_PUT and self._watchers:
            from topology.state.api import Operation, VersionEntry
            self._notify(VersionEntry(key, value, timestamp, None, Operation.PUT))
        return code


class ReverseDropsFirst(InMemoryVersionedKeyValueStore):
    def reverse_range(self, from_key: Any = None, to_key: Any = None
                      ) -> list[tuple[Any, VersionedRecord]]:
        return super().reverse_range(from_key, to_key)[:-1] or []


class PurgeKeepsHistory(InMemoryVersionedKeyValueStore):
    def _purge(self, key: Any, timestamp: int) -> None:
        from topology.state.api import Operation
        self._write(key, timestamp, None, Operation.PURGE)


class ExpiresTooEagerly(InMemoryVersionedKeyValueStore):
    def _trim(self, key: Any, cutoff: int) -> None:
        super()._trim(key, cutoff + 1)


class LatestMarkerExpiresWithRetention(InMemoryVersionedKeyValueStore):
    """Shows a latest delete marker in history even once it is older than the cutoff."""

    def history(self, key: Any, newest_first: bool = True, include_deletes: bool = False
                ) -> list[Any]:
        out = super().history(key, newest_first, include_deletes)
        latest = self._latest(key)
        if include_deletes and latest is not None and not out and latest.value is None:
            out = [latest]
        return out

    def _trim(self, key: Any, cutoff: int) -> None:
        return None


MUTANTS = [GraceBoundaryRejected, KafkaSegmentGap, IgnoresMaxVersions, RestoreCountsSkipped,
           NotifiesRejectedWrites, ReverseDropsFirst, PurgeKeepsHistory, ExpiresTooEagerly,
           LatestMarkerExpiresWithRetention]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.__name__)
def test_contract_rejects_a_broken_backend(mutant: type[InMemoryVersionedKeyValueStore]) -> None:
    with pytest.raises(AssertionError, match=r"^check_versioned_store: \w+: "):
        check_versioned_store(lambda **options: mutant("m", str.encode, **options))


def test_contract_rejects_a_factory_that_ignores_options() -> None:
    def factory(**options: Any) -> InMemoryVersionedKeyValueStore:
        return InMemoryVersionedKeyValueStore("m", str.encode, 100)

    with pytest.raises(AssertionError, match="configuration_is_validated"):
        check_versioned_store(factory)
