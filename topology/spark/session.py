"""A local SparkSession with settings that suit one machine (examples, tests, benchmarks)."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ("LOCAL_SETTINGS", "local_session")

LOCAL_SETTINGS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
"""Spark's settings for a local run: few shuffle partitions (the default, 200, makes each
stateful micro-batch about ten times slower on a small machine), no UI, loopback networking,
UTC session time, and the RocksDB state store (the ``DistributedRunner``'s stateful steps
run in ``transformWithState``, which needs it)."""


def local_session(app_name: str = "topology", cores: int = 2, **settings: str) -> Any:
    """Return a local ``SparkSession`` (``local[cores]``) with :data:`LOCAL_SETTINGS`.

    ``settings`` add to or replace them, with dots written as underscores
    (``spark_sql_shuffle_partitions="1"``). Python workers run this interpreter
    (``PYSPARK_PYTHON`` is set to it unless already set), so they see the same packages.
    Spark's log level is set to ``ERROR``. If a session is already active, Spark returns it
    with the SQL settings applied.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no warning about the host name
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(f"local[{int(cores)}]").appName(app_name)
    config = dict(LOCAL_SETTINGS)
    config.update({key.replace("_", "."): str(value) for key, value in settings.items()})
    for key, value in config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
