"""ForeachBatchRunner throughput against Spark's own windowed count, the bare transfer, the driver.

Run: ``make bench-spark`` (or ``python benchmarks/spark_runner.py [--records N] [--files F]
[--shuffle-partitions P] [--distributed-only]``).

Method. One process, one local SparkSession (``local[2]``, 2 shuffle partitions unless
``--shuffle-partitions`` says otherwise, UI off), one
data set: the clicks workload of ``benchmarks/workloads.py`` (1 M records over 10 k keys, about
1 ms apart, 10 % up to 3 s late), written as 10 Parquet files of 100 k rows in Spark's Kafka
source schema (binary UTF-8 ``key``/``value``, ``topic``, ``timestamp``). The job: one final
count per key and 60 s tumbling window, 2 s grace. Each Spark figure is one streaming query
over the same files, ``maxFilesPerTrigger=1`` (10 micro-batches), ``trigger(availableNow=True)``,
timed from ``start()`` to the end of ``awaitTermination()``, after a warm-up query:

- ``transfer``: ``foreachBatch(lambda df, _: df.toArrow())``, the cost of moving each batch to
  Python, which bounds any foreachBatch engine;
- ``spark``: Spark's own ``withWatermark("timestamp", "2 seconds")``, ``groupBy(window(60 s),
  key).count()`` in append mode, counted by ``foreachBatch`` (HDFS-backed state store, the
  default);
- ``runner``: ``foreachBatch(ForeachBatchRunner(...))`` with the driver topology
  (``Consumed(Serdes.string(), Serdes.string())`` reading the binary columns, final results by
  ``until_window_closes``), a callable sink counting the records;
- ``driver``: the same topology in ``TopologyTestDriver``, fed the same (decoded) records with
  ``pipe_records``, no Spark: the engine alone;
- ``distributed``: ``DistributedRunner`` over the same files (Spark's RocksDB state store),
  three topologies: the same final counts and the same windows with ``map_values`` +
  ``reduce``, both in batched ``transformWithStateInPandas`` processors (the library's own
  aggregation and suppression, a stream time per input partition; until the release that
  brought that, the count was Spark's own and the reduce folded values Spark collected,
  timed by Spark's watermark); and the clicks as a
  table rate-limited by ``until_time_limit(1 s)`` (batched ``transformWithStateInPandas``
  processors, 8 key buckets, run last with the RocksDB state store, which
  ``transformWithState`` needs); and an as-of join of the clicks with a versioned table of the
  same clicks (the same files, read again as the topic ``pages``: each click joined with its
  user's page as of its time, in batched processors, 8 key buckets; its rate counts the 1 M
  clicks, while 2 M records pass through the processors); and the same join followed by a
  final ``reduce`` per user and window of the joined records (two stateful steps in one
  query: the join's processors, one key group per input partition, then the aggregation's;
  until the release that brought that, Spark's window aggregation on input sorted by
  timestamp). Each run is checked to emit exactly the driver's records (the joins' driver
  fed each file's clicks and pages merged lowest timestamp first, as the runner's task
  takes them).
  ``--distributed-only`` runs just these and Spark's own aggregation.

Results printed as records/s and as ratios. The runner's output is checked to equal the driver's.
Spark's count differs slightly by design: its watermark moves only between micro-batches, so
it keeps some records that per-record stream time drops as late (here both emitted 159,620
windows, and the driver dropped 265 records as late).

Measured (2 cores shared with other jobs, load average 2.5 to 4.5, so absolute figures are
well below those of an idle machine; compare the ratios, taken within one run). Runs 1 to 3
ran the runner and the driver in memory only. Runs 4 and 5 also with a ``state_dir`` (durable:
RocksDB stores, atomic commits); in run 4 the runner committed as the driver does by default
(at least every 10,000 records), in run 5 once per micro-batch, as it does now. The durable
driver alone commits every 10,000 records (its default):

==================================  ========  ========  ========  ========  ========
records/s                           run 1     run 2     run 3     run 4     run 5
==================================  ========  ========  ========  ========  ========
``toArrow`` transfer alone           106,273   102,585   103,997    87,419   109,617
Spark windowed count + watermark      58,469    71,546    57,421    36,613    71,402
ForeachBatchRunner, in memory         61,902    70,264    62,121    39,619    65,145
TopologyTestDriver, in memory        134,171   147,569   120,133    81,784   144,959
ForeachBatchRunner, durable                                         10,864    26,354
TopologyTestDriver, durable                                         14,972    22,101
runner in memory / Spark's own         1.06x     0.98x     1.08x     1.08x     0.91x
runner in memory / transfer            0.58x     0.68x     0.60x     0.45x     0.59x
runner in memory / driver in memory    0.46x     0.48x     0.52x     0.48x     0.45x
runner durable / Spark's own                                         0.30x     0.37x
runner durable / driver durable                                      0.73x     1.19x
==================================  ========  ========  ========  ========  ========

DistributedRunner (``--distributed-only``; the same machine, load average 4 to 7; runs 2 and 3
also with the time-limited table, run 4 also with the as-of join, beside a test run for part
of it; run 5 also with the join followed by windows, load average 2 to 7.7 from other jobs):

=========================================  =========  =========  =========  =========  =========
records/s                                  run 1      run 2      run 3      run 4      run 5
=========================================  =========  =========  =========  =========  =========
Spark windowed count + watermark              47,730     35,202     47,200     35,987     43,373
distributed count() (Spark's own count)       50,133     34,362     45,203     27,737     39,687
distributed map_values + reduce()             12,027      8,394     10,861      9,204     10,582
distributed table until_time_limit (TWS)                  8,833     11,541      9,885      7,895
distributed as-of join, versioned (TWS)                                        15,590      6,354
distributed as-of join, then window reduce                                                 4,776
count / Spark's own                            1.05x      0.98x      0.96x      0.77x      0.92x
reduce / Spark's own                           0.25x      0.24x      0.23x      0.26x      0.24x
until_time_limit / Spark's own                            0.25x      0.24x      0.27x      0.18x
as-of join / Spark's own                                                       0.43x      0.15x
join, then window reduce / Spark's own                                                    0.11x
=========================================  =========  =========  =========  =========  =========

Where the time goes: a micro-batch is moved to Python, then processed; ``foreachBatch`` calls
are sequential, so the runner's time is about the transfer's plus the engine's (column-wise
decoding of the string columns costs a few percent). The engine is the bound: in memory it
runs this workload at about 1.3 times the transfer's rate, durable at about a fifth of it (a
profile of the durable driver shows the state codec's encoding and the unfused RocksDB
window-store reads and writes on top).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workloads import clicks  # noqa: E402

from suppress import BufferConfig, Suppressed  # noqa: E402
from topology import (  # noqa: E402
    Consumed,
    Materialized,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)
from topology.runtime.engine import merge_by_timestamp  # noqa: E402
from topology.spark import DistributedRunner, ForeachBatchRunner, local_session  # noqa: E402

SIZE, GRACE = 60_000, 2_000
LIMIT = 1_000
"""The time limit of the ``until_time_limit`` run (ms)."""
MODES = ("in memory", "durable")
"""``in memory``: no ``state_dir``; ``durable``: a ``state_dir`` (RocksDB stores, commits)."""


def topology() -> Any:
    b = StreamsBuilder()
    (b.stream("clicks", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()))
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def final_sums(stream: Any) -> None:
    """Final sums of the stream's values per key and window, to the topic ``counts``."""
    (stream
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE))
     .reduce(lambda total, one: total + one)
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))


def summed_topology() -> Any:
    """The same windows with ``reduce`` (a Python function): the collect-and-fold path."""
    b = StreamsBuilder()
    final_sums(b.stream("clicks", Consumed(key_serde=Serdes.string(),
                                           value_serde=Serdes.string()))
               .map_values(lambda value: 1))
    return b.build()


def time_limited_topology() -> Any:
    """The clicks as a table, each key's updates limited to one per second of event time."""
    b = StreamsBuilder()
    (b.table("clicks", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()))
     .suppress(Suppressed.until_time_limit(LIMIT, BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def joined_topology(then_windows: bool = False) -> Any:
    """Each click joined with its user's page as of its time (a versioned table of the clicks,
    read from the same files as the topic ``pages``): the batched as-of join; 1 if the page
    is the latest, else 0. ``then_windows``: summed per user and window, final results (two
    stateful steps in one query: the join's processors, then the aggregation's)."""
    b = StreamsBuilder()
    consumed = Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())
    pages = b.table("pages", consumed, Materialized.versioned("pages", 10 * SIZE))
    joined = b.stream("clicks", consumed).join(pages, lambda page, latest: int(page == latest))
    if then_windows:
        final_sums(joined)
    else:
        joined.to("counts")
    return b.build()


def joined_driver(records: list[tuple[str, Any, int]], topo: Any, files: int) -> list[Any]:
    """The driver's output of a join topology, fed as the runner's task takes the files:
    in each micro-batch (a file), the clicks and the same records as pages merged lowest
    timestamp first (Kafka's PartitionGroup; at equal heads, the clicks first)."""
    size = -(-len(records) // files)
    with TopologyTestDriver(topo) as driver:
        inputs = {t: driver.create_input_topic(t) for t in ("clicks", "pages")}
        for first in range(0, len(records), size):
            part = records[first:first + size]
            for topic, run in merge_by_timestamp({"clicks": part, "pages": part}):
                inputs[topic].pipe_records(run)
        return driver.create_output_topic("counts").read_records_to_list()


def distributed_run(spark: Any, folder: Path, work: Path, name: str, topo: Any,
                    topics: tuple[str, ...] = ("clicks",)) -> tuple[float, list[Any]]:
    """Seconds of a DistributedRunner's availableNow query over the files, and its output
    (each of ``topics`` a stream of the same files)."""
    schema = spark.read.parquet(str(folder)).schema
    out: list[Any] = []
    runner = DistributedRunner(topo, sources={topic: spark.readStream.schema(schema).option(
                                   "maxFilesPerTrigger", 1).parquet(str(folder))
                                   for topic in topics},
                               sinks={"counts": lambda records, _: out.extend(records)},
                               checkpoint_dir=str(work / f"chk-{name}"))
    started = time.perf_counter()
    runner.run_available()
    return time.perf_counter() - started, out


def write_files(records: list[tuple[str, Any, int]], folder: Path, files: int) -> None:
    folder.mkdir()
    size = -(-len(records) // files)
    for n, first in enumerate(range(0, len(records), size)):
        part = records[first:first + size]
        table = pa.table({
            "key": pa.array([k for k, _, _ in part], pa.string()).cast(pa.binary()),
            "value": pa.array([v for _, v, _ in part], pa.string()).cast(pa.binary()),
            "topic": pa.array(["clicks"] * len(part), pa.string()),
            "timestamp": pa.array([t * 1000 for _, _, t in part], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")),
        })
        staged = folder.parent / f".part-{n:03d}.parquet"
        pq.write_table(table, staged)
        os.utime(staged, (1_700_000_000 + n, 1_700_000_000 + n))  # read in this order
        os.rename(staged, folder / f"part-{n:03d}.parquet")


def timed_query(spark: Any, folder: Path, work: Path, name: str,
                build: Callable[[Any], Any], max_files: int = 1) -> float:
    """Seconds from start() to the end of an availableNow query over the files."""
    schema = spark.read.parquet(str(folder)).schema
    stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", max_files)
              .parquet(str(folder)))
    writer = build(stream).option("checkpointLocation", str(work / f"chk-{name}"))
    started = time.perf_counter()
    writer.trigger(availableNow=True).start().awaitTermination()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description="ForeachBatchRunner throughput")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--distributed-only", action="store_true",
                        help="only Spark's own aggregation and the DistributedRunner")
    parser.add_argument("--shuffle-partitions", type=int, default=2,
                        help="spark.sql.shuffle.partitions: the state's partitions (default 2)")
    args = parser.parse_args()
    logging.getLogger("topology").setLevel(logging.ERROR)  # one warning per late record
    n = args.records
    records = clicks(n, args.keys)
    spark = local_session("bench-spark-runner",
                          spark_sql_shuffle_partitions=str(args.shuffle_partitions))
    from pyspark.sql import functions as F

    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        work = Path(tmp)
        folder = work / "input"
        write_files(records, folder, args.files)
        warm = work / "warm"
        write_files(records[:50_000], warm, 1)
        timed_query(spark, warm, work, "warm-transfer",
                    lambda s: s.writeStream.foreachBatch(lambda df, _: df.toArrow()))
        timed_query(spark, warm, work, "warm-spark", lambda s: (
            s.withWatermark("timestamp", "2 seconds")
            .groupBy(F.window("timestamp", "60 seconds"), F.col("key").cast("string"))
            .count().writeStream.outputMode("append").format("noop")))

        transfer = 0.0 if args.distributed_only else timed_query(
            spark, folder, work, "transfer",
            lambda s: s.writeStream.foreachBatch(lambda df, _: df.toArrow()))
        own_windows: list[Any] = []

        def spark_own(s: Any) -> Any:
            return (s.withWatermark("timestamp", "2 seconds")
                    .groupBy(F.window("timestamp", "60 seconds"), F.col("key").cast("string"))
                    .count().writeStream.outputMode("append")
                    .foreachBatch(lambda df, _: own_windows.append(df.toArrow())))

        provider = "spark.sql.streaming.stateStore.providerClass"
        rocksdb = spark.conf.get(provider)
        spark.conf.unset(provider)  # Spark's own aggregation on its default state store
        own = timed_query(spark, folder, work, "spark", spark_own)
        spark.conf.set(provider, rocksdb)  # transformWithState needs RocksDB
        distributed_run(spark, warm, work, "warm-dist", topology())  # its Python workers
        spark_windows = [sum(t.num_rows for t in own_windows)]
        distributed_runs = {
            "count": distributed_run(spark, folder, work, "dist-count", topology()),
            "reduce": distributed_run(spark, folder, work, "dist-reduce", summed_topology()),
        }
        for kind, make in (("count", topology), ("reduce", summed_topology)):
            with TopologyTestDriver(make()) as driver:
                driver.create_input_topic("clicks").pipe_records(records)
                expected = driver.create_output_topic("counts").read_records_to_list()
            assert Counter((r.key, r.value) for r in distributed_runs[kind][1]) == Counter(
                (r.key, r.value) for r in expected), \
                f"the distributed runner ({kind}) differs from the driver"
        limited = distributed_run(spark, folder, work, "dist-limit", time_limited_topology())
        with TopologyTestDriver(time_limited_topology()) as driver:
            driver.create_input_topic("clicks").pipe_records(records)
            limited_driver = driver.create_output_topic("counts").read_records_to_list()
        assert Counter((r.key, r.value, r.timestamp) for r in limited[1]) == Counter(
            (r.key, r.value, r.timestamp) for r in limited_driver), \
            "the distributed runner (until_time_limit) differs from the driver"
        distributed_runs["until_time_limit"] = limited
        joined = distributed_run(spark, folder, work, "dist-join", joined_topology(),
                                 ("clicks", "pages"))
        assert Counter((r.key, r.value, r.timestamp) for r in joined[1]) == Counter(
            (r.key, r.value, r.timestamp)
            for r in joined_driver(records, joined_topology(), args.files)), \
            "the distributed runner (as-of join) differs from the driver"
        distributed_runs["join"] = joined
        chained = distributed_run(spark, folder, work, "dist-join-window",
                                  joined_topology(then_windows=True), ("clicks", "pages"))
        assert Counter((r.key, r.value, r.timestamp) for r in chained[1]) == Counter(
            (r.key, r.value, r.timestamp)
            for r in joined_driver(records, joined_topology(then_windows=True), args.files)), \
            "the distributed runner (as-of join, then windows) differs from the driver"
        distributed_runs["join, then windows"] = chained
        if args.distributed_only:
            spark.stop()
            print_distributed(n, args, own, sum(spark_windows), distributed_runs)
            return
        runs: dict[str, tuple[float, list[Any], float]] = {}
        for mode in MODES:
            out: list[Any] = []
            runner = ForeachBatchRunner(
                topology(), state_dir=work / "state" if mode == "durable" else None,
                sinks={"counts": lambda records, _, out=out: out.extend(records)})
            seconds = timed_query(spark, folder, work, f"runner-{mode}",
                                  lambda s, runner=runner: s.writeStream.foreachBatch(runner))
            runs[mode] = seconds, out, runner.metrics()["dropped-records-total"]
            runner.close()
        spark.stop()

        alone: dict[str, float] = {}
        for mode in MODES:
            started = time.perf_counter()
            with TopologyTestDriver(topology(), state_dir=work / "driver-state"
                                    if mode == "durable" else None) as driver:
                driver.create_input_topic("clicks").pipe_records(records)
                driver_out = driver.create_output_topic("counts").read_records_to_list()
            alone[mode] = time.perf_counter() - started
            assert runs[mode][1] == driver_out, f"the runner ({mode}) differs from the driver"

    rate = {"transfer": n / transfer, "spark": n / own}
    print(f"{n:,} records in {args.files} files, {args.keys:,} keys, 60 s windows, 2 s grace, "
          f"{args.shuffle_partitions} shuffle partitions")
    print(f"  toArrow transfer alone            {rate['transfer']:>10,.0f} records/s")
    print(f"  Spark windowed count+watermark    {rate['spark']:>10,.0f} records/s  "
          f"({sum(spark_windows):,} windows)")
    for mode in MODES:
        seconds, out, dropped = runs[mode]
        rate[f"runner {mode}"] = n / seconds
        rate[f"driver {mode}"] = n / alone[mode]
        print(f"  ForeachBatchRunner, {mode:<13} {n / seconds:>10,.0f} records/s  "
              f"({len(out):,} windows, {dropped:,.0f} late drops)")
        print(f"  TopologyTestDriver, {mode:<13} {n / alone[mode]:>10,.0f} records/s  "
              f"(no Spark)")
    for mode in MODES:
        runner = rate[f"runner {mode}"]
        print(f"runner ({mode}) / Spark's own aggregation: {runner / rate['spark']:.2f}x, "
              f"/ toArrow transfer: {runner / rate['transfer']:.2f}x, "
              f"/ driver alone ({mode}): {runner / rate[f'driver {mode}']:.2f}x")
    print_distributed(n, args, own, sum(spark_windows), distributed_runs)


def print_distributed(n: int, args: Any, own: float, windows: int,
                      runs: dict[str, tuple[float, list[Any]]]) -> None:
    """The DistributedRunner's rates beside Spark's own aggregation (same run)."""
    print(f"DistributedRunner, {n:,} records in {args.files} files (Spark's own aggregation "
          f"emitted {windows:,} windows; the runner's records are checked equal to the "
          f"driver's):")
    print(f"  Spark windowed count+watermark    {n / own:>10,.0f} records/s")
    for kind, (seconds, _) in runs.items():
        label = {"count": "window count() (TWS)", "reduce": "window map_values+reduce (TWS)",
                 "until_time_limit": "table until_time_limit (TWS)",
                 "join": "as-of join, versioned (TWS)",
                 "join, then windows": "as-of join, then window reduce"}
        print(f"  {label[kind]:<33} {n / seconds:>10,.0f} records/s  "
              f"({own / seconds:.2f}x Spark's own)")


if __name__ == "__main__":
    main()
