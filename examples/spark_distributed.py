"""The main job's payment alerts on Spark's executors: the same topology, run by DistributedRunner.

Run it with ``make example-distributed`` (or ``python examples/spark_distributed.py
[--state-dir DIR]``).

The topology is the one of ``examples/spark_pipeline.py`` (``build_topology``), unchanged:
each payment converted to EUR at the exchange rate valid when it was made (an as-of join on a
versioned table of rates), re-keyed by account, summed per account and hour, one final total
per window once it closed (10 minutes of grace), those above 5,000 EUR to "alerts".
``DistributedRunner`` compiles it into one Spark streaming query:

- the payments' ``map`` to their currency runs in ``mapInArrow`` on the executors;
- the rates and the payments meet in a batched ``transformWithStateInPandas``, in the order
  a Kafka task takes them (each currency's rate history a row of Spark's state store), where
  the library's own versioned store and join convert each payment, and the ``map`` re-keys
  it by account;
- the hourly totals run in another batched ``transformWithStateInPandas``, the library's own
  windowed aggregation and final-results suppression, accounts in key groups, with the
  task's stream time;
- the ``filter`` over the threshold runs with them, and ``foreachBatch`` writes the alerts as
  Parquet.

1. Generates the same day of payments and rates as ``spark_pipeline.py``, out of order, and
   writes them as Parquet files in Spark's Kafka source schema, one micro-batch per file.
2. Streams the files through the runner: the payments and the rates are two streams of the
   same files (one topic each).
3. Prints the alerts and checks them against ``TopologyTestDriver`` on the same records in
   the order the runner's task takes them (in each micro-batch, payments and rates merged
   lowest timestamp first), which is what ``ForeachBatchRunner`` gives too.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_pipeline import (  # noqa: E402
    FILES,
    alert_tuples,
    build_topology,
    driver_alerts,
    generate,
    in_task_order,
    job_main,
    print_alerts,
    read_batches,
    read_input,
    write_files,
)

from topology.spark import DistributedRunner, sinks  # noqa: E402


def topic_stream(spark: Any, folder: Path, topic: str) -> Any:
    """One topic's records of the input files, as a stream (one file per micro-batch)."""
    schema = spark.read.parquet(str(folder)).schema
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .parquet(str(folder)).where(f"topic = '{topic}'"))


def run(spark: Any, work: Path, payments: int, files: int = FILES) -> bool:
    """Generate (once), run distributed, print; True if the alerts equal the driver's."""
    incoming = work / "input"
    if not incoming.exists():
        write_files(generate(payments), incoming, files)  # one batch each, in arrival order
    alerts_dir = work / "alerts"
    topology = build_topology()
    # the join runs in transformWithStateInPandas, which needs Spark's RocksDB state store
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    runner = DistributedRunner(
        topology, sources={"payments": topic_stream(spark, incoming, "payments"),
                           "rates": topic_stream(spark, incoming, "rates")},
        sinks={"alerts": sinks.parquet(alerts_dir)},
        checkpoint_dir=str(work / "checkpoint"))
    print(f"Streaming {incoming} through the compiled topology, a micro-batch per file:")
    started = time.perf_counter()
    runner.run_available()
    elapsed = time.perf_counter() - started
    for progress in runner.query.recentProgress:
        print(f"  batch {progress['batchId']}: {progress['numInputRows']:>6} rows in "
              f"(both streams), {progress['batchDuration'] / 1000:.2f} s")
    alerts = print_alerts(spark, alerts_dir)
    records = read_input(incoming)
    print(f"\n{len(records):,} records in {elapsed:.1f} s: {len(records) / elapsed:,.0f} "
          f"records/s (Spark's file source and the query start included); alerts: "
          f"{len(alerts)}")
    expected = driver_alerts(topology, in_task_order(read_batches(incoming)))
    same = sorted(alert_tuples(alerts)) == sorted(expected)
    print(f"Same alerts as TopologyTestDriver on the same records: {'yes' if same else 'NO'}")
    return same


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    return job_main(argv, spark, run, "payment-alerts-distributed", __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
