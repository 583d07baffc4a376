"""What differs between the supported pyspark versions: 3.5 has no Arrow-table API, no state API.

pyspark 4.0 added ``DataFrame.toArrow()`` and ``SparkSession.createDataFrame(pyarrow.Table)``.
On 3.5 a DataFrame's Arrow batches are collected the way its ``toPandas()`` collects them
(one JVM call returning Arrow record batches, never row by row), and a table becomes a
DataFrame through its rows with the schema its Arrow schema gives. The DistributedRunner
needs ``transformWithStateInPandas`` (pyspark 4.0 and newer): :func:`require_state_api` says
so before anything else runs.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ("frame_of", "require_state_api", "to_arrow")


def to_arrow(frame: Any) -> pa.Table:
    """The rows of the Spark DataFrame ``frame`` as one Arrow table, collected to the driver."""
    collect = getattr(frame, "toArrow", None)
    if collect is not None:
        table: pa.Table = collect()
        return table
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(frame.schema)
    return pa.Table.from_batches(frame._collect_as_arrow(), schema=schema)


def frame_of(spark: Any, table: pa.Table) -> Any:
    """A Spark DataFrame of the Arrow ``table``, with the Spark types of its Arrow types."""
    from pyspark.sql import DataFrame

    if hasattr(DataFrame, "toArrow"):  # pyspark 4: a table is taken as it is
        return spark.createDataFrame(table)
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(table.to_pylist(), schema=from_arrow_schema(table.schema))


def require_state_api(who: str) -> None:
    """Refuse a pyspark without ``transformWithStateInPandas`` (older than 4.0), naming it.

    :raises IllegalStateError: on pyspark 3.5, saying what runs there instead.
    """
    import pyspark
    from pyspark.sql.group import GroupedData

    if not hasattr(GroupedData, "transformWithStateInPandas"):
        from ..errors import IllegalStateError

        raise IllegalStateError(
            f"{who} needs pyspark 4.0 or newer (it keeps state with "
            f"transformWithStateInPandas); this is pyspark {pyspark.__version__}: upgrade, "
            f"or run the topology with ForeachBatchRunner, which runs on pyspark 3.5")
