"""DistributedRunner with sliding windows (batched processors) beside Spark's own windowed count.

Run: ``python benchmarks/spark_sliding.py [--records N] [--keys K] [--files F]``.

Method. One process, one local SparkSession (``local[2]``, RocksDB state store, which
``transformWithState`` needs), one data set: the clicks workload of
``benchmarks/workloads.py`` (records about 1 ms apart over ``--keys`` keys), sorted by
timestamp, written as ``--files`` Parquet files in Spark's Kafka source schema, one
micro-batch each (``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``, timed from
``start()`` to the end of ``awaitTermination()``, after a warm-up of each query):

- ``spark``: Spark's own ``withWatermark`` + ``groupBy(window(60 s), key).count()`` in append
  mode (tumbling windows: Spark has no sliding window that starts at each record);
- ``sliding``: ``DistributedRunner`` with a final ``count()`` per key in sliding windows of
  10 s, 2 s grace (``mapInArrow``, then the batched ``transformWithStateInPandas``
  processors, 8 key buckets), its output checked to equal the driver's records;
- ``driver``: the same topology in ``TopologyTestDriver``, no Spark (``pipe_records``): the
  library's sliding aggregation and suppression alone, which the processors run inside.

Results printed as records/s and the ratio; compare ratios within one run (the machine is
shared).

Measured (2 shared cores; 200,000 in-order clicks over 1,000 keys, 4 files, 376,905 sliding
windows, the runner's equal to the driver's; run 1 beside other jobs (load average about 5)
and without the driver's figure, run 2 on a quieter machine):

==============================================  ==========  ==========
records/s                                       run 1       run 2
==============================================  ==========  ==========
Spark windowed count + watermark (tumbling)         26,217      27,075
DistributedRunner, sliding count (TWS)               2,737       3,447
TopologyTestDriver alone, sliding count                          7,211
runner / Spark's own                                 0.10x       0.13x
runner / driver alone                                            0.48x
==============================================  ==========  ==========

A sliding window per record and key means about 12 window updates per click here (1,000
keys, a click per key and second, windows of 10 s): the library's sliding aggregation,
which the processors run, is the larger part of the cost (the driver alone), Spark's
transfers (``mapInArrow``, the processors' pandas frames, nearly two output records per
click) the rest.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_runner import distributed_run, timed_query, write_files  # noqa: E402
from workloads import clicks  # noqa: E402

from suppress import BufferConfig, Suppressed  # noqa: E402
from topology import (  # noqa: E402
    Consumed,
    Serdes,
    SlidingWindows,
    StreamsBuilder,
    TopologyTestDriver,
)
from topology.spark import local_session  # noqa: E402
from topology.spark.distributed import ROCKSDB_PROVIDER  # noqa: E402

DIFFERENCE, GRACE = 10_000, 2_000


def sliding_topology() -> Any:
    """A final count per key in sliding windows of 10 s, 2 s grace."""
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()))
     .group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(DIFFERENCE, GRACE))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def main() -> None:
    parser = argparse.ArgumentParser(description="DistributedRunner sliding windows")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--files", type=int, default=4)
    args = parser.parse_args()
    logging.getLogger("topology").setLevel(logging.ERROR)
    n = args.records
    records = sorted(clicks(n, args.keys), key=lambda r: r[2])
    spark = local_session("bench-spark-sliding")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    from pyspark.sql import functions as F

    def spark_own(s: Any) -> Any:
        return (s.withWatermark("timestamp", "2 seconds")
                .groupBy(F.window("timestamp", "60 seconds"), F.col("key").cast("string"))
                .count().writeStream.outputMode("append").format("noop"))

    with tempfile.TemporaryDirectory(prefix="bench-spark-sliding-") as tmp:
        work = Path(tmp)
        folder = work / "input"
        write_files(records, folder, args.files)
        warm = work / "warm"
        write_files(records[:20_000], warm, 1)
        timed_query(spark, warm, work, "warm-spark", spark_own)
        distributed_run(spark, warm, work, "warm-sliding", sliding_topology())
        own = timed_query(spark, folder, work, "spark", spark_own)
        seconds, out = distributed_run(spark, folder, work, "sliding", sliding_topology())
    started = time.perf_counter()
    with TopologyTestDriver(sliding_topology()) as driver:
        driver.create_input_topic("clicks").pipe_records(records)
        expected = driver.create_output_topic("counts").read_records_to_list()
    alone = time.perf_counter() - started
    assert Counter((r.key, r.value, r.timestamp) for r in out) == Counter(
        (r.key, r.value, r.timestamp) for r in expected), "the runner differs from the driver"
    print(f"{n:,} in-order clicks, {args.keys:,} keys, {args.files} files; "
          f"{len(expected):,} sliding windows (the driver's)")
    print(f"Spark windowed count + watermark (tumbling)  {n / own:>10,.0f} records/s")
    print(f"DistributedRunner, sliding count (TWS)       {n / seconds:>10,.0f} records/s "
          f"({own / seconds:.2f}x)")
    print(f"TopologyTestDriver alone, sliding count      {n / alone:>10,.0f} records/s "
          f"(the runner: {alone / seconds:.2f}x)")
    spark.stop()


if __name__ == "__main__":
    main()
