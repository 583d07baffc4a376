"""Spark's Python workers import this checkout, not another installed copy of the package.

Workers are separate processes started from the current directory, which the docs tests
change; without this they import whatever ``topology`` the interpreter finds installed.

Every Spark JVM the suite starts (the shared session, and those of child processes: the kill
runs, the examples, the pyspark 3.5 smoke test) compiles with the JIT's first tier only
(``SPARK_SUBMIT_OPTS``, unless already set): a test's JVM lives for minutes and runs small
batches, and the optimizing tier's compile threads cost it about a quarter of its CPU time
without making those batches faster.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]])

os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

import hypothesis_profiles  # noqa: E402,F401 - registers and loads the profile before any test


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``spark`` every test that starts Spark through the shared session (the ``spark``
    fixture, directly or through ``rocksdb_state`` and ``default_state_store``); tests that
    start it otherwise (a child process, a docs page) carry the marker themselves.
    ``pytest -m "not spark"`` then runs everything else, the without-Spark harness tests of
    tests/spark included."""
    for item in items:
        shared = "spark" in getattr(item, "fixturenames", ())
        if shared:
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("spark") is not None:
            # with pytest-xdist (``make test``: ``--dist loadgroup``) every test of the shared
            # SparkSession runs in one worker, which starts it; those that start Spark
            # otherwise form a group of their own, usually run by another worker beside it
            # (they are a third of the Spark tests' time)
            item.add_marker(pytest.mark.xdist_group("spark" if shared else "spark-own"))
