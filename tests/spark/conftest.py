"""One local SparkSession for the whole test run (starting one takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from topology.spark import local_session
from topology.spark.distributed import ROCKSDB_PROVIDER

PROVIDER = "spark.sql.streaming.stateStore.providerClass"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("topology-tests", spark_sql_shuffle_partitions="1")
    yield session
    session.stop()


@pytest.fixture
def default_state_store(spark: Any) -> Iterator[Any]:
    """The shared session with Spark's default (HDFS-backed) state store."""
    before = spark.conf.get(PROVIDER, None)
    spark.conf.unset(PROVIDER)
    yield spark
    if before is not None:
        spark.conf.set(PROVIDER, before)


@pytest.fixture
def rocksdb_state(spark: Any) -> Iterator[Any]:
    """The shared session with the RocksDB state store (transformWithState needs it)."""
    before = spark.conf.get(PROVIDER, None)
    spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)
    yield spark
    if before is None:
        spark.conf.unset(PROVIDER)
    else:
        spark.conf.set(PROVIDER, before)
