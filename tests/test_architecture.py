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
    "SessionWindowedKStream",
}
"""The names a user writes in a custom processor or serde, or in type hints."""
SUPPRESS_REEXPORTS = {"Suppressed", "BufferConfig"}
"""Re-exported from ``suppress``: what a user needs to call ``KTable.suppress``."""
DSL_OPTION_NAMES = {"Named"}
"""Options of DSL calls beyond DESIGN.md's: Kafka's ``Named`` (issue 24)."""
TOPOLOGY_PUBLIC = DESIGN_NAMES | USER_CODE_NAMES | SUPPRESS_REEXPORTS | DSL_OPTION_NAMES
SUPPRESS_PUBLIC = {
    "Suppressed", "BufferConfig", "BufferFullError", "BufferFullStrategy", "EagerBufferConfig",
    "StrictBufferConfig", "InvalidSuppressionError",
}
SPARK_PUBLIC = {"ForeachBatchRunner", "DistributedRunner", "Columns", "sinks", "BatchProgress",
                "CheckpointMismatchError", "RunnerTotals",
                "ColumnMappingError", "UnsupportedTopologyError", "local_session"}
"""``topology.spark``: the names DESIGN.md fixes, the progress record, the mapping error, the
distributed runner's refusal and a local session with settings that suit one machine."""
SINKS_PUBLIC = {"memory", "parquet", "kafka_frame", "MemorySink", "ParquetSink",
                "KafkaFrameSink", "Sink"}
SPARK_ONLY = {"pyspark", "pyarrow", "pandas", "numpy"}
"""Imported only under ``topology/spark/`` (the ``spark`` extra)."""


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


def test_spark_names() -> None:
    import topology.spark
    from topology.spark import sinks

    assert set(topology.spark.__all__) == SPARK_PUBLIC
    assert set(sinks.__all__) == SINKS_PUBLIC
    for name in SPARK_PUBLIC | {f"sinks.{n}" for n in SINKS_PUBLIC - {"Sink"}}:
        obj = topology.spark
        for part in name.split("."):
            obj = getattr(obj, part)
        assert obj.__doc__, f"topology.spark.{name} has no docstring"


def test_suppress_never_imports_topology() -> None:
    offenders = [(p, m) for p, m in _imports("suppress") if m.split(".")[0] == "topology"]
    assert offenders == []


def test_heavy_dependencies_stay_in_their_modules() -> None:
    for package in ("suppress", "topology"):
        for path, module in _imports(package):
            root = module.split(".")[0]
            rel = path.relative_to(ROOT).as_posix()
            if root in SPARK_ONLY:
                assert rel.startswith("topology/spark/"), rel
            if root == "rocksdict":
                assert rel == "suppress/spill.py" or rel.startswith("topology/state/rocksdb/"), rel


def test_runtime_never_reads_the_system_clock_directly() -> None:
    for path in (ROOT / "topology").rglob("*.py"):
        if path.name == "clock.py":
            continue
        text = path.read_text()
        assert "time.time(" not in text and "time.time_ns(" not in text, path


DSL_ORDER = ["builder", "stream", "grouped", "table"]
"""The DSL modules, each importing only those after it at run time (type hints aside): a
handle that makes a handle of an earlier module asks the builder for it."""


def test_the_dsl_modules_import_one_another_in_one_direction() -> None:
    for position, name in enumerate(DSL_ORDER):
        path = ROOT / "topology" / f"{name}.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        hinted = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                  and ast.unparse(block.test) == "TYPE_CHECKING" for node in ast.walk(block)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in hinted:
                module = (node.module or "").split(".")[0]
                if module in DSL_ORDER:
                    assert DSL_ORDER.index(module) > position, (
                        f"topology/{name}.py imports .{module} at run time")
