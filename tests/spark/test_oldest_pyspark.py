"""The ForeachBatchRunner on the oldest pyspark it supports (3.5.0), in a venv of its own.

``make test`` creates ``.venv-oldest`` (pyspark 3.5.0 with the pandas, numpy and pyarrow that
platforms ship beside it, and this project) and this test runs the ForeachBatchRunner's own
tests there, in a child process: its batches, sinks, state on a URI and restarts. The
DistributedRunner needs pyspark 4.0: on 3.5 it refuses at once, saying so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark  # in the Spark tests' xdist group (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
OLDEST = ROOT / ".venv-oldest" / "bin" / "python"
OLDEST_VERSION = "3.5.0"
RUNNER_TESTS = ["tests/spark/test_foreach_batch.py", "tests/spark/test_sinks.py",
                "tests/spark/test_remote_state.py"]
"""What differs between pyspark versions: Arrow out of Spark and back (sinks), the Hadoop
FileSystem of state on a URI, the runner's replays and restarts."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    if not OLDEST.exists():
        pytest.fail(f"{OLDEST} is missing: make test creates it (or run make .venv-oldest/"
                    ".installed); it holds pyspark {OLDEST_VERSION}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "PYTEST"))}
    return subprocess.run([str(OLDEST), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_the_foreach_batch_runner_passes_its_tests_on_pyspark_3_5() -> None:
    version = _run("-c", "import pyspark; print(pyspark.__version__)")
    assert version.stdout.strip() == OLDEST_VERSION, version.stderr
    run = _run("-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
               "-m", "not slow", "-q", *RUNNER_TESTS)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and " failed" not in run.stdout


def test_the_distributed_runner_says_it_needs_pyspark_4() -> None:
    run = _run("-c", "from topology import StreamsBuilder\n"
                     "from topology.spark import DistributedRunner\n"
                     "b = StreamsBuilder(); b.stream('a').to('b')\n"
                     "DistributedRunner(b.build(), {}, checkpoint_dir='x')")
    assert run.returncode == 1
    assert ("IllegalStateError: DistributedRunner needs pyspark 4.0 or newer (it keeps state "
            f"with transformWithStateInPandas); this is pyspark {OLDEST_VERSION}: upgrade, or "
            "run the topology with ForeachBatchRunner") in run.stderr
