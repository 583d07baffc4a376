"""Spark engines: run a topology on Spark Structured Streaming.

``ForeachBatchRunner`` runs a topology as the function of ``writeStream.foreachBatch``: a
task per input partition on Spark's driver, fed each micro-batch through Arrow, committing
state and batch id together so that replayed batches are skipped
(``CheckpointMismatchError`` for a batch of another checkpoint; ``RunnerTotals`` counts what
it did). ``DistributedRunner`` compiles a topology to Spark operators run on the executors
(stateless steps in ``mapInArrow``, aggregations and time limits in batched
``transformWithStateInPandas`` processors with a stream time per input partition), refusing
what it cannot compile (``UnsupportedTopologyError``). ``Columns`` maps DataFrame columns to
the parts of a record (Spark's Kafka source schema by default); ``sinks`` holds where output
records go; ``local_session`` starts a local SparkSession with
settings that suit one machine. pyspark and pyarrow are imported only here (the ``spark`` extra).
"""

# Without the spark extra, name the missing install instead of a bare "No module named ...".
try:
    import pandas as _pandas  # type: ignore[import-untyped]  # noqa: F401
    import pyarrow as _pyarrow  # noqa: F401
    import pyspark as _pyspark  # noqa: F401
except ImportError as _exc:
    raise ImportError(
        "topology.spark needs the spark extra: pip install 'suppress-topology[spark]' "
        f"(missing: {_exc.name or _exc})",
        name=_exc.name,
    ) from _exc

from . import sinks as sinks
from ._compile import UnsupportedTopologyError as UnsupportedTopologyError
from .columns import ColumnMappingError as ColumnMappingError
from .columns import Columns as Columns
from .distributed import DistributedRunner as DistributedRunner
from .foreach_batch import BatchProgress as BatchProgress
from .foreach_batch import CheckpointMismatchError as CheckpointMismatchError
from .foreach_batch import ForeachBatchRunner as ForeachBatchRunner
from .foreach_batch import RunnerTotals as RunnerTotals
from .session import local_session as local_session

__all__ = ("BatchProgress", "CheckpointMismatchError", "ColumnMappingError", "Columns",
           "DistributedRunner", "ForeachBatchRunner", "RunnerTotals", "UnsupportedTopologyError",
           "local_session", "sinks")
