"""The payment alerts of ``spark_pipeline.py``, compiled to Spark operators by DistributedRunner.

Run it with ``make example-distributed`` (or ``python examples/spark_distributed.py
[--state-dir DIR]``).

The main job (``examples/spark_pipeline.py``) converts each payment at the exchange rate valid
when it was made (an as-of join on a versioned table), then sums the hourly totals (a
windowed aggregation). ``DistributedRunner`` compiles either step, but one stateful step per
topology, so it refuses that topology when it is built, naming the aggregation and the join;
this job shows the refusal, then runs the part that compiles, with one difference: payments
are converted at a fixed reference rate per currency (``map``) instead of the rate of their
time. The rest is the same: hourly EUR totals per account, final once the
hour closed (10 minutes of grace), alerts above 5,000 EUR, written as Parquet.

1. Generates the same day of out-of-order payments, as Parquet files in Spark's Kafka source
   schema (one micro-batch per file).
2. Runs the topology with ``DistributedRunner``: the stateless steps in ``mapInArrow`` on the
   executors, the hourly totals as Spark's watermarked window aggregation (its state in the
   query's checkpoint), the alerts through ``foreachBatch`` into ``sinks.parquet``.
3. Prints the alerts and compares them with ``TopologyTestDriver``. Spark's watermark moves
   only between micro-batches, so it keeps late payments that a task's per-record stream time
   drops: the alerts equal the driver's for the same payments in timestamp order, and the
   job also prints how many payments the driver drops when fed in arrival order.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_pipeline import (  # noqa: E402
    ALERT_EUR,
    CURRENCIES,
    FILES,
    build_topology,
    generate,
    hourly_alerts,
    job_main,
    read_input,
    write_files,
)

from topology import (  # noqa: E402
    Consumed,
    Serdes,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from topology.spark import (  # noqa: E402
    DistributedRunner,
    UnsupportedTopologyError,
    sinks,
)


def build_compiled_topology() -> Topology:
    """Payments -> EUR at a reference rate -> hourly total per account -> final totals > 5,000."""
    b = StreamsBuilder()
    hourly_alerts(
        b.stream("payments", Consumed(key_serde=Serdes.string(), value_serde=Serdes.json()))
        .map(lambda payment_id, p: (p["account"], p["amount"] * CURRENCIES[p["currency"]])))
    return b.build()


def payments_only(folder: Path, spark: Any) -> Any:
    """The payments of the input files as a stream (the rates are not needed here)."""
    schema = spark.read.parquet(str(folder)).schema
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .parquet(str(folder)).where("topic = 'payments'"))


def run(spark: Any, work: Path, payments: int, files: int = FILES) -> bool:
    """Generate (once), run distributed, print; True if the alerts equal the driver's."""
    incoming = work / "input"
    if not incoming.exists():
        write_files(generate(payments), incoming, files)
        for n, path in enumerate(sorted(incoming.iterdir())):  # one batch each, in order
            os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))
    alerts_dir = work / "alerts"
    try:
        DistributedRunner(build_topology(), sources={}, sinks={},
                          checkpoint_dir=str(work / "checkpoint"))
    except UnsupportedTopologyError as refused:
        print(f"The main job's topology is refused:\n  {refused}\n")
    topology = build_compiled_topology()
    runner = DistributedRunner(topology, sources={"payments": payments_only(incoming, spark)},
                               sinks={"alerts": sinks.parquet(alerts_dir)},
                               checkpoint_dir=str(work / "checkpoint"))
    print(f"Streaming {incoming} through the compiled topology, a micro-batch per file:")
    started = time.perf_counter()
    runner.run_available()
    elapsed = time.perf_counter() - started
    alerts = (spark.read.parquet(str(alerts_dir)).toArrow().to_pylist()
              if alerts_dir.exists() else [])
    alerts.sort(key=lambda a: (a["key"]["start"], a["key"]["key"]))
    print(f"\nAlerts: hourly totals above {ALERT_EUR:,.0f} EUR, written to {alerts_dir}")
    for a in alerts:
        start = dt.datetime.fromtimestamp(a["key"]["start"] / 1000, dt.UTC)
        print(f"  {start:%Y-%m-%d %H:%M}-{start + dt.timedelta(hours=1):%H:%M}  "
              f"{a['key']['key']}  {a['value']:>10,.2f} EUR  (batch {a['batch_id']})")
    records = [r for r in read_input(incoming) if r[0] == "payments"]
    print(f"\n{len(records):,} payments in {elapsed:.1f} s: {len(records) / elapsed:,.0f} "
          f"records/s (Spark's file source and the query start included); alerts: "
          f"{len(alerts)}")
    got = sorted((a["key"]["key"], a["key"]["start"], round(a["value"], 6),
                  int(a["timestamp"].timestamp() * 1000)) for a in alerts)
    in_order, _ = driver_alerts(topology, sorted(records, key=lambda r: r[3]))
    in_arrival, dropped = driver_alerts(topology, records)
    same = got == in_order
    print(f"Same alerts as TopologyTestDriver on the payments in timestamp order: "
          f"{'yes' if same else 'NO'}")
    print(f"TopologyTestDriver on the payments in arrival order drops {dropped:,.0f} late "
          f"payments and gives {len(in_arrival)} alerts "
          f"({'the same' if in_arrival == in_order else 'not the same'}): its stream time "
          f"moves with every record, Spark's watermark once per micro-batch")
    return same


def driver_alerts(topology: Topology, records: list[tuple[str, bytes, bytes, int]]
                  ) -> tuple[list[tuple[str, int, float, int]], float]:
    """The driver's alerts for the payments in the given order, and its late drops."""
    with TopologyTestDriver(topology) as driver:
        payments = driver.create_input_topic("payments", Serdes.bytes(), Serdes.bytes())
        for _, key, value, ts in records:
            payments.pipe_input(key, value, timestamp=ts)
        alerts = sorted((r.key.key, r.key.window.start, round(r.value, 6), r.timestamp)
                        for r in driver.create_output_topic("alerts").read_records_to_list())
        return alerts, driver.metrics()["dropped-records-total"]


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    return job_main(argv, spark, run, "payment-alerts-distributed", __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
