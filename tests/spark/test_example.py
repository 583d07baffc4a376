"""The Spark jobs (examples/spark_pipeline.py, spark_distributed.py) agree with the driver."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def test_the_spark_job_prints_alerts_equal_to_the_driver(spark: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    job = runpy.run_path(str(EXAMPLE))
    state = tmp_path / "run"
    args = ["--payments", "6000", "--files", "3", "--state-dir", str(state)]
    assert job["main"](args, spark=spark) == 0
    out = capsys.readouterr().out
    assert "batch 2:" in out and "batch 3:" not in out
    assert "Same alerts as TopologyTestDriver on the same records: yes" in out
    assert "alerts: 0" not in out
    assert sorted(p.name for p in (state / "alerts").iterdir())[0].startswith("batch_id=")
    # run again on the same directory: the query resumes from its checkpoint, nothing is new
    assert job["main"](["--state-dir", str(state)], spark=spark) == 0
    again = capsys.readouterr().out
    assert "batch 0:" not in again and "records/s" in again


DISTRIBUTED = EXAMPLE.parent / "spark_distributed.py"


def test_the_distributed_job_runs_the_main_topology_and_agrees_with_the_driver(
        rocksdb_state: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = runpy.run_path(str(DISTRIBUTED))
    assert job["build_topology"].__module__ == "spark_pipeline"  # the main job's topology
    args = ["--payments", "4000", "--files", "3", "--state-dir", str(tmp_path)]
    assert job["main"](args, spark=rocksdb_state) == 0
    out = capsys.readouterr().out
    assert "batch 2:" in out
    assert "Same alerts as TopologyTestDriver on the same records: yes" in out
    assert "alerts: 0" not in out
    assert sorted(p.name for p in (tmp_path / "alerts").iterdir())[0].startswith("batch_id=")
