"""Kafka's versioned-store scenarios, data-driven, against every backend in the registry.

Data:

- ``tests/data/versioned_scenarios.json``: a verbatim copy of the shared conformance file,
  with the outputs Kafka produces. Only ``kind == "store"`` scenarios run here (the raw
  ``VersionedKeyValueStore``, so ``valid_to`` is compared too); the DSL scenarios (joins,
  table aggregate, filter) belong to the DSL tests.
- ``tests/data/versioned_differences.json``: scenarios where this project deliberately
  differs from Kafka's implementation.

Expectations: an op's ``specExpect``, where present, wins over its ``expect``. ``specExpect``
is the documented semantics where Kafka's implementation differs (DESIGN.md deliberate
difference 2: multi-version queries return every version overlapping ``[from, to]``, which
Kafka misses when a version's ``valid_to`` lies in a later segment); ``expect`` is Kafka's
observed output. Our difference file carries both for each op that differs.

Op mapping: ``put`` -> ``put`` return code; ``get`` with/without ``asOf``; ``delete`` -> the
returned record; ``multiVersionQuery`` -> ``get_versions(key, from, to, descending=order !=
"ASCENDING")`` (Kafka serves ``ANY`` newest first); ``restore`` -> ``restore(records)`` (one
changelog batch replayed with Kafka's restore rules; the batch-max expiry optimisation has
no observable effect); ``droppedRecordsMetric`` -> ``dropped_records``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from topology.state.api import VersionedRecord

from .backends import VERSIONED_BACKENDS, check_internals

DATA = Path(__file__).parent.parent / "data"
KAFKA = json.loads((DATA / "versioned_scenarios.json").read_text())["scenarios"]
OURS = json.loads((DATA / "versioned_differences.json").read_text())["scenarios"]
STORE_SCENARIOS = {s["name"]: s for s in KAFKA + OURS if s["kind"] == "store"}


def test_scenario_sets() -> None:
    kafka_store = [s for s in KAFKA if s["kind"] == "store"]
    assert len(kafka_store) == 34
    assert {s["kind"] for s in KAFKA} - {"store"}, "the DSL scenarios are in the copy too"
    assert all(s["kind"] == "store" for s in OURS)
    assert len(STORE_SCENARIOS) == len(kafka_store) + len(OURS), "scenario names are unique"
    differing = [o for s in OURS for o in s["ops"] if "specExpect" in o]
    assert differing and all(o["specExpect"] != o["expect"] for o in differing)


def _record(record: VersionedRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    assert isinstance(record, VersionedRecord)
    return {"value": record.value, "timestamp": record.timestamp, "validTo": record.valid_to}


def _run(store: Any, op: dict[str, Any]) -> Any:
    kind = op["op"]
    if kind == "put":
        return store.put(op["key"], op["value"], op["ts"])
    if kind == "get":
        return _record(store.get(op["key"], op.get("asOf")))
    if kind == "delete":
        return _record(store.delete(op["key"], op["ts"]))
    if kind == "multiVersionQuery":
        records = store.get_versions(op["key"], op["from"], op["to"],
                                     descending=op["order"] != "ASCENDING")
        return [_record(r) for r in records]
    if kind == "restore":
        store.restore([(r["key"], r["value"], r["ts"]) for r in op["records"]])
        return None
    if kind == "droppedRecordsMetric":
        return store.dropped_records
    raise AssertionError(f"unknown op {kind!r}")


@pytest.mark.parametrize("backend", sorted(VERSIONED_BACKENDS))
@pytest.mark.parametrize("name", sorted(STORE_SCENARIOS))
def test_store_scenario(name: str, backend: str) -> None:
    scenario = STORE_SCENARIOS[name]
    config = scenario["config"]
    store = VERSIONED_BACKENDS[backend](history_retention_ms=config["historyRetention"],
                                        segment_interval_ms=config["segmentInterval"])
    try:
        for i, op in enumerate(scenario["ops"]):
            got = _run(store, op)
            if op["op"] != "restore":
                expected = op.get("specExpect", op["expect"])
                assert got == expected, f"{name} op {i}: {op}"
            check_internals(store)
    finally:
        store.close()
