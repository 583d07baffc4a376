"""One local SparkSession for the whole test run (starting one takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from topology.spark import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("topology-tests", spark_sql_shuffle_partitions="1")
    yield session
    session.stop()
