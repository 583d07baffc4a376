"""Main job on Spark: payment alerts from an out-of-order stream, run by Spark Structured Streaming.

Run it with ``make example`` (or ``python examples/spark_pipeline.py [--state-dir DIR]``).

1. Generates a day of card payments in five currencies from 1,000 accounts, with exchange
   rates that change every 15 minutes. Records arrive out of order: most a few seconds late,
   a few half an hour late; some accounts have bursts of large payments.
2. Writes them as Parquet files in Spark's Kafka source schema (binary ``key``/``value``,
   ``topic``, ``timestamp``): the job reads files here, and a Kafka topic unchanged.
3. Streams the files through ``foreachBatch(ForeachBatchRunner(...))`` with
   ``trigger(availableNow=True)``, one file per micro-batch. The topology converts each payment
   to EUR at the rate valid when it was made (an as-of join on a versioned table), sums EUR per
   account and hour, and emits one final total per window once the window closed (10 minutes of
   grace for late payments), keeping those above the alert threshold. Alerts are written as
   Parquet, one directory per micro-batch.
4. Prints the alerts and a summary, and checks that they equal what ``TopologyTestDriver``
   gives for the same records in the order the runner's task takes them (in each
   micro-batch, payments and rates merged lowest timestamp first, as Kafka's PartitionGroup
   takes two topics of one partition).

Everything (input, Spark checkpoint, state, alerts) lives under ``--state-dir``, by default a
temporary directory removed at the end. Given a directory that holds an earlier run, the query
resumes from its checkpoint and processes only input it has not seen.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    KStream,
    Materialized,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from topology.runtime.engine import merge_by_timestamp
from topology.spark import ForeachBatchRunner, local_session, sinks

MINUTE = 60_000
HOUR = 60 * MINUTE
START = int(dt.datetime(2024, 3, 1, tzinfo=dt.UTC).timestamp() * 1000)
CURRENCIES = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17, "CHF": 1.04, "JPY": 0.0062}
ALERT_EUR = 5_000.0
"""An account's payments in one hour above this total raise an alert."""
FILES = 10
"""Input files, one micro-batch each."""


# -- the topology: the same one a unit test runs with TopologyTestDriver -------------------------

def build_topology() -> Topology:
    """Payments -> EUR as of their time -> hourly total per account -> final totals > 5,000."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=Serdes.string(), value_serde=Serdes.double()),
                    Materialized.versioned("rates", history_retention=2 * HOUR))
    payments = b.stream("payments", Consumed(key_serde=Serdes.string(), value_serde=Serdes.json()))
    hourly_alerts(payments
                  .map(lambda payment_id, p: (p["currency"], (p["account"], p["amount"])))
                  .join(rates, lambda payment, rate: (payment[0], payment[1] * rate))
                  .map(lambda currency, converted: converted))  # re-keyed by account
    return b.build()


def hourly_alerts(eur_by_account: KStream) -> None:
    """Hourly EUR totals per account, one final total per hour, those above 5,000 to "alerts"."""
    (eur_by_account
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(HOUR, 10 * MINUTE))
     .reduce(lambda total, eur: total + eur)
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .filter(lambda window, total: total > ALERT_EUR)
     .to("alerts"))


# -- a day of out-of-order payments and rates ---------------------------------------------------

def generate(payments: int, seed: int = 2024) -> list[tuple[str, bytes, bytes, int]]:
    """``(topic, key, value, timestamp)`` in arrival order; timestamps are when it happened."""
    rng = random.Random(seed)
    day = 24 * HOUR
    events: list[tuple[int, str, bytes, bytes, int]] = []  # (arrival, topic, key, value, ts)
    for currency, rate in CURRENCIES.items():
        for ts in range(START - MINUTE, START + day, 15 * MINUTE):
            if currency != "EUR":
                rate *= math.exp(rng.gauss(0, 0.004))
            arrival = ts + (0 if ts < START else rng.randrange(90_000))
            events.append((arrival, "rates", currency.encode(), Serdes.double().serialize(rate)
                           or b"", ts))
    accounts = [f"acct-{i:04d}" for i in range(1_000)]
    bursts = {(rng.choice(accounts), rng.randrange(24)) for _ in range(30)}
    for i in range(payments):
        ts = START + rng.randrange(day)
        account = rng.choice(accounts)
        amount = round(min(rng.lognormvariate(3.5, 1.0), 4_000.0), 2)
        currency = rng.choice(list(CURRENCIES))
        amount = round(amount / CURRENCIES[currency], 2)
        delay = rng.randrange(20 * MINUTE, 40 * MINUTE) if rng.random() < 0.005 \
            else int(rng.expovariate(1 / 20_000))
        value = json.dumps({"account": account, "currency": currency, "amount": amount})
        events.append((ts + delay, "payments", f"pay-{i:07d}".encode(), value.encode(), ts))
    # the bursts: many large payments from one account within an hour
    for account, hour in sorted(bursts):
        for j in range(rng.randrange(3, 12)):
            ts = START + hour * HOUR + rng.randrange(HOUR)
            value = json.dumps({"account": account, "currency": "EUR",
                                "amount": round(rng.uniform(300, 1_200), 2)})
            events.append((ts + int(rng.expovariate(1 / 20_000)), "payments",
                           f"burst-{account}-{hour}-{j}".encode(), value.encode(), ts))
    events.sort(key=lambda e: e[0])
    return [(topic, key, value, ts) for _, topic, key, value, ts in events]


def write_files(records: list[tuple[str, bytes, bytes, int]], folder: Path,
                files: int = FILES) -> None:
    """Parquet files in Spark's Kafka source schema, each appearing whole (renamed in).

    Spark's file source takes files by modification time: each file gets one a second after
    the previous one, so that files written within the same millisecond keep their order.
    """
    folder.mkdir(parents=True)
    size = -(-len(records) // files)
    for n, first in enumerate(range(0, len(records), size)):
        part = records[first:first + size]
        table = pa.table({
            "key": pa.array([r[1] for r in part], pa.binary()),
            "value": pa.array([r[2] for r in part], pa.binary()),
            "topic": pa.array([r[0] for r in part], pa.string()),
            "timestamp": pa.array([r[3] * 1000 for r in part], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")),
        })
        staged = folder.parent / f".part-{n:03d}.parquet"
        pq.write_table(table, staged)
        os.utime(staged, (1_700_000_000 + n, 1_700_000_000 + n))
        os.rename(staged, folder / f"part-{n:03d}.parquet")


def read_batches(folder: Path) -> list[list[tuple[str, bytes, bytes, int]]]:
    """The records of each input file (one micro-batch each), in the file's order."""
    batches = []
    for path in sorted(folder.glob("part-*.parquet")):
        table = pq.read_table(path)
        ts = table.column("timestamp").cast(pa.int64()).to_pylist()
        batches.append([(t, k, v, s // 1000) for t, k, v, s in zip(
            table.column("topic").to_pylist(), table.column("key").to_pylist(),
            table.column("value").to_pylist(), ts, strict=True)])
    return batches


def read_input(folder: Path) -> list[tuple[str, bytes, bytes, int]]:
    """The records of every input file, in the order the file source reads them."""
    return [record for batch in read_batches(folder) for record in batch]


def in_task_order(batches: list[list[tuple[str, bytes, bytes, int]]]
                  ) -> list[tuple[str, bytes, bytes, int]]:
    """The records as the runner's task takes them: in each micro-batch, the two topics
    merged lowest timestamp first, each topic's records in their order (Kafka's
    PartitionGroup)."""
    records = []
    for batch in batches:
        by_topic: dict[str, list[tuple[bytes, bytes, int]]] = {}
        for topic, key, value, ts in batch:
            by_topic.setdefault(topic, []).append((key, value, ts))
        for topic, run in merge_by_timestamp(by_topic):
            records += [(topic, key, value, ts) for key, value, ts in run]
    return records


# -- the job -------------------------------------------------------------------------------------

def run(spark: Any, work: Path, payments: int, files: int = FILES) -> bool:
    """Generate (once), stream through the runner, print; True if it matches the driver."""
    incoming = work / "input"
    if not incoming.exists():
        write_files(generate(payments), incoming, files)
    alerts_dir = work / "alerts"
    topology = build_topology()
    runner = ForeachBatchRunner(topology, state_dir=work / "state",
                                sinks={"alerts": sinks.parquet(alerts_dir)})
    processed = batches = 0

    def each_batch(batch_df: Any, batch_id: int) -> None:
        nonlocal processed, batches
        runner(batch_df, batch_id)
        p = runner.last_progress
        assert p is not None
        processed += p.records_in
        batches += 1
        print(f"  batch {batch_id}: {p.records_in:>6} records in, {p.records_out['alerts']:>3} "
              f"alerts out, {p.seconds:.2f} s{'  (skipped: already committed)' * p.skipped}")

    schema = spark.read.parquet(str(incoming)).schema
    print(f"Streaming {incoming} through the topology, a micro-batch per file:")
    started = time.perf_counter()
    query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
             .parquet(str(incoming))
             .writeStream.foreachBatch(each_batch)
             .option("checkpointLocation", str(work / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    metrics = runner.metrics()
    runner.close()

    alerts = print_alerts(spark, alerts_dir)
    print(f"\nRecords in: {processed:,} in {batches} micro-batches, {elapsed:.1f} s: "
          f"{processed / elapsed:,.0f} records/s (Spark's file source included)")
    print(f"Final hourly totals emitted: {metrics['suppression-emit-total']:,.0f}, "
          f"alerts: {len(alerts)}; late records dropped: "
          f"{metrics['dropped-records-total']:,.0f}")

    expected = driver_alerts(topology, in_task_order(read_batches(incoming)))
    same = sorted(alert_tuples(alerts)) == sorted(expected)
    print(f"Same alerts as TopologyTestDriver on the same records: {'yes' if same else 'NO'}")
    return same


def print_alerts(spark: Any, alerts_dir: Path) -> list[dict[str, Any]]:
    """Read the alerts the parquet sink wrote (every batch), print them by window and account."""
    alerts: list[dict[str, Any]] = (spark.read.parquet(str(alerts_dir)).toArrow().to_pylist()
                                    if alerts_dir.exists() else [])
    alerts.sort(key=lambda a: (a["key"]["start"], a["key"]["key"]))
    print(f"\nAlerts: hourly totals above {ALERT_EUR:,.0f} EUR, written to {alerts_dir}")
    for a in alerts:
        start = dt.datetime.fromtimestamp(a["key"]["start"] / 1000, dt.UTC)
        print(f"  {start:%Y-%m-%d %H:%M}-{start + dt.timedelta(hours=1):%H:%M}  "
              f"{a['key']['key']}  {a['value']:>10,.2f} EUR  (batch {a['batch_id']})")
    return alerts


def alert_tuples(alerts: list[dict[str, Any]]) -> list[tuple[str, int, int, float, int]]:
    """The alerts read back from parquet, in the form :func:`driver_alerts` gives."""
    return [(a["key"]["key"], a["key"]["start"], a["key"]["end"], a["value"],
             int(a["timestamp"].timestamp() * 1000)) for a in alerts]


def driver_alerts(topology: Topology, records: list[tuple[str, bytes, bytes, int]]
                  ) -> list[tuple[str, int, int, float, int]]:
    """The alerts the test driver gives for the records, piped as bytes in the given order."""
    with TopologyTestDriver(topology) as driver:
        topics = {name: driver.create_input_topic(name, Serdes.bytes(), Serdes.bytes())
                  for name in ("payments", "rates")}
        for topic, key, value, ts in records:
            topics[topic].pipe_input(key, value, timestamp=ts)
        return [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
                for r in driver.create_output_topic("alerts").read_records_to_list()]


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    return job_main(argv, spark, run, "payment-alerts", __doc__.splitlines()[0])


def job_main(argv: list[str] | None, spark: Any, run_job: Any, app_name: str,
             description: str) -> int:
    """Parse the job's options, start Spark unless given, run ``run_job`` in its directory.

    ``run_job(spark, work_dir, payments, files)`` returns whether the output matched the
    driver's; the exit status is 0 if it did.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="where input, checkpoint, state and alerts go (default: a "
                             "temporary directory removed at the end)")
    parser.add_argument("--payments", type=int, default=150_000)
    parser.add_argument("--files", type=int, default=FILES)
    args = parser.parse_args(argv)
    # each late record dropped is logged as a warning (as Kafka Streams does); the summary
    # counts them instead
    topology_log = logging.getLogger("topology")
    level = topology_log.level
    topology_log.setLevel(logging.ERROR)
    print("Starting Spark (local[2]) ...")
    session = spark or local_session(app_name)
    try:
        if args.state_dir is not None:
            args.state_dir.mkdir(parents=True, exist_ok=True)
            same = run_job(session, args.state_dir, args.payments, args.files)
        else:
            with tempfile.TemporaryDirectory(prefix="payment-alerts-") as work:
                same = run_job(session, Path(work), args.payments, args.files)
    finally:
        topology_log.setLevel(level)
        if spark is None:
            session.stop()
    return 0 if same else 1

if __name__ == "__main__":
    sys.exit(main())
