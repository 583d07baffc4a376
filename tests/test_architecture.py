"""Pins the public surface and the import directions (DESIGN.md, STYLE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import suppress
import topology

ROOT = Path(__file__).parent.parent

DESIGN_NAMES = {
    "StreamsBuilder", "Topology", "TopologyTestDriver", "TestRecord", "TimeWindows",
    "SlidingWindows", "SessionWindows", "Windowed", "Window", "Consumed", "Produced", "Grouped",
    "Materialized", "Serdes",
}
"""The names DESIGN.md fixes."""
USER_CODE_NAMES = {
    "Processor", "ProcessorContext", "Record", "PunctuationType", "Cancellable", "Serde",
    "SerdeError", "KStream", "KTable", "KGroupedStream", "KGroupedTable", "TimeWindowedKStream",
}
"""The names a user writes in a custom processor or serde, or in type hints."""
TOPOLOGY_PUBLIC = DESIGN_NAMES | USER_CODE_NAMES
SUPPRESS_PUBLIC = {
    "Suppressed", "BufferConfig", "BufferFullError", "BufferFullStrategy", "EagerBufferConfig",
    "StrictBufferConfig", "InvalidSuppressionError",
}


def _imports(package: str) -> list[tuple[Path, str]]:
    found = []
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(path, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((path, node.module))
    return found


def test_public_names_match_design() -> None:
    assert set(topology.__all__) == TOPOLOGY_PUBLIC
    assert set(suppress.__all__) == SUPPRESS_PUBLIC
    for name in topology.__all__:
        assert getattr(topology, name).__doc__, f"{name} has no docstring"
    from topology.state import VersionedRecord

    assert VersionedRecord.__doc__


def test_suppress_never_imports_topology() -> None:
    offenders = [(p, m) for p, m in _imports("suppress") if m.split(".")[0] == "topology"]
    assert offenders == []


def test_heavy_dependencies_stay_in_their_modules() -> None:
    for package in ("suppress", "topology"):
        for path, module in _imports(package):
            root = module.split(".")[0]
            rel = path.relative_to(ROOT).as_posix()
            if root == "pyspark":
                assert rel.startswith("topology/spark/"), rel
            if root == "rocksdict":
                assert rel == "suppress/spill.py" or rel.startswith("topology/state/rocksdb/"), rel


def test_runtime_never_reads_the_system_clock_directly() -> None:
    for path in (ROOT / "topology").rglob("*.py"):
        if path.name == "clock.py":
            continue
        text = path.read_text()
        assert "time.time(" not in text and "time.time_ns(" not in text, path
