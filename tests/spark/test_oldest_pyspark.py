"""The ForeachBatchRunner on the oldest pyspark it supports (3.5.0), in a venv of its own.

``make test`` creates ``.venv-oldest`` (pyspark 3.5.0 with the pandas, numpy and pyarrow that
platforms ship beside it, and this project) and this test runs a smoke set of the
ForeachBatchRunner's own tests there, in a child process: its batches, sinks, state on a URI
and restarts. The DistributedRunner needs pyspark 4.0: on 3.5 it refuses at once, saying so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark  # its own Spark: the "spark-own" xdist group (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
OLDEST = ROOT / ".venv-oldest" / "bin" / "python"
OLDEST_VERSION = "3.5.0"
SMOKE_TESTS = [
    *(f"tests/spark/test_foreach_batch.py::{name}" for name in (
        "test_a_streaming_query_from_files",
        "test_data_leaves_spark_through_arrow_only",
        "test_columns_of_other_spark_types_arrive_as_python_values",
        "test_a_mapping_that_does_not_fit_is_refused[headers-type]",
        "test_a_replayed_batch_is_skipped",
        "test_a_crash_then_a_restart_on_the_same_state_dir_equals_one_run[in-the-sink]",
        "test_a_crash_then_a_restart_on_the_same_state_dir_equals_one_run[mid-batch]")),
    *(f"tests/spark/test_sinks.py::{name}" for name in (
        "test_parquet_output_reads_back_in_spark_with_the_batch_id",
        "test_kafka_frame_gives_spark_the_kafka_sink_schema")),
    *(f"tests/spark/test_remote_state.py::{name}" for name in (
        "test_round_trip",
        "test_a_new_object_sees_what_another_committed",
        "test_pruning_keeps_two_versions",
        "test_hadoop_errors_are_os_errors")),
]
"""The ForeachBatchRunner's tests of what differs between pyspark versions: a streaming query
and Arrow out of Spark and back (batches, Spark column types and their names in errors,
sinks), the Hadoop FileSystem of state on a URI (writes, deletes), the runner's replays and
restarts; one test case each. The rest of those files runs on the newest pyspark only."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    if not OLDEST.exists():
        pytest.fail(f"{OLDEST} is missing: make test creates it (or run make .venv-oldest/"
                    ".installed); it holds pyspark {OLDEST_VERSION}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "PYTEST"))}
    return subprocess.run([str(OLDEST), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_the_foreach_batch_runner_passes_its_smoke_tests_on_pyspark_3_5() -> None:
    version = _run("-c", "import pyspark; print(pyspark.__version__)")
    assert version.stdout.strip() == OLDEST_VERSION, version.stderr
    run = _run("-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
               "-m", "not slow", "-q", *SMOKE_TESTS)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert f"{len(SMOKE_TESTS)} passed" in run.stdout, run.stdout[-3000:]


def test_the_distributed_runner_says_it_needs_pyspark_4() -> None:
    run = _run("-c", "from topology import StreamsBuilder\n"
                     "from topology.spark import DistributedRunner\n"
                     "b = StreamsBuilder(); b.stream('a').to('b')\n"
                     "DistributedRunner(b.build(), {}, checkpoint_dir='x')")
    assert run.returncode == 1
    assert ("IllegalStateError: DistributedRunner needs pyspark 4.0 or newer (it keeps state "
            f"with transformWithStateInPandas); this is pyspark {OLDEST_VERSION}: upgrade, or "
            "run the topology with ForeachBatchRunner") in run.stderr
