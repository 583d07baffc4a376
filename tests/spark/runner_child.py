"""A Spark driver that the kill tests SIGKILL: a ``ForeachBatchRunner`` with its state on a URI.

``python -m tests.spark.runner_child WORK [POINT BATCH]`` (or ``RUNNER_CHILD_KILL=POINT:BATCH``
in the environment) starts a local SparkSession, streams the Parquet files of ``WORK/input``
(Spark's Kafka source schema, one file per micro-batch, ``trigger(availableNow=True)``) into a
runner of :func:`topology` with ``state_dir="file://WORK/remote/state"`` and
``local_dir=WORK/local``, checkpoint ``WORK/checkpoint``. Its sink writes each batch's records
to ``WORK/out/batch-<id>.json`` (a temporary name, then ``os.replace``: a replay overwrites).

With a kill point, the process kills itself (and its process group, the JVM included, when it
leads one) with SIGKILL in the given batch, at one of :data:`POINTS`:

``batch-start``
    in the ``foreachBatch`` function, before the runner is called;
``after-sink``
    in the sink, once the batch's file is in place (the runner has not committed);
``before-upload``
    after the runner's local commit, before it uploads the commit to the URI;
``after-upload``
    after the upload, before the runner returns (Spark has not committed the batch);
``after-runner``
    in the ``foreachBatch`` function after the runner returned, before Spark commits.

Progress goes to stdout, one line each (flushed): ``session`` once Spark runs, ``batch <id>
start``, ``batch <id> sink <records>``, ``batch <id> done skipped=<0|1> committed=<id>``,
``kill <point> <id>`` just before a kill, and ``finished batches=<n> records_in=<n>`` (the
runner's committed totals) when the query stopped.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from topology import Topology
from topology.runtime.outputs import TestRecord

POINTS = ("batch-start", "after-sink", "before-upload", "after-upload", "after-runner")
"""Where the child can kill itself (see the module docstring)."""
ENV = "RUNNER_CHILD_KILL"
WINDOW_MS = 1_000
GRACE_MS = 200

OutRecord = tuple[str, int, int, int, int]
"""(key, window start, window end, count, timestamp)"""


def topology() -> Topology:
    """The topology the child runs: final per-key counts of 1 s windows (200 ms grace)."""
    from .test_partitions import final_counts

    return final_counts(WINDOW_MS, GRACE_MS)


def as_tuple(record: TestRecord) -> OutRecord:
    """A windowed count record as the sink writes it (and the tests compare it)."""
    key, timestamp = record.key, record.timestamp
    assert timestamp is not None
    return (key.key, key.window.start, key.window.end, record.value, timestamp)


def say(*words: object) -> None:
    print(*words, flush=True)


def die(point: str, batch_id: int) -> NoReturn:
    """SIGKILL this process; its whole group (the JVM too) when it leads one."""
    say("kill", point, batch_id)
    sys.stderr.flush()
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("not killed")  # pragma: no cover


def kill_point(argv: list[str]) -> tuple[str, int] | None:
    """The kill point from the arguments after WORK, or the environment; ``None``: none."""
    if argv:
        point, batch = argv
    elif os.environ.get(ENV):
        point, batch = os.environ[ENV].split(":")
    else:
        return None
    if point not in POINTS:
        raise SystemExit(f"unknown kill point {point!r}; known: {', '.join(POINTS)}")
    return point, int(batch)


def kafka_schema(headers: bool = False) -> Any:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType())]
    if headers:  # includeHeaders=true
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def main(work: Path, kill: tuple[str, int] | None) -> None:
    import topology.spark.foreach_batch as foreach_batch
    from topology.spark import ForeachBatchRunner, local_session

    def at(point: str, batch_id: int) -> None:
        if kill == (point, batch_id):
            die(point, batch_id)

    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)

    def sink(records: list[TestRecord], batch_id: int) -> None:
        final = out / f"batch-{batch_id}.json"
        temporary = out / f".batch-{batch_id}.json.tmp"
        temporary.write_text(json.dumps([as_tuple(r) for r in records]), "utf-8")
        os.replace(temporary, final)
        say("batch", batch_id, "sink", len(records))
        at("after-sink", batch_id)

    upload = foreach_batch._upload  # the runner's upload of its local commit to the URI

    def killing_upload(engine: Any, remote: Any, batch_id: int) -> None:
        at("before-upload", batch_id)
        upload(engine, remote, batch_id)
        at("after-upload", batch_id)

    foreach_batch._upload = killing_upload

    spark = local_session("kill-child", spark_sql_shuffle_partitions="1",
                          # a faster JVM start: every kill test starts several children
                          spark_driver_extraJavaOptions="-XX:TieredStopAtLevel=1")
    say("session")
    runner = ForeachBatchRunner(topology(), state_dir="file://" + str(work / "remote" / "state"),
                                local_dir=work / "local", sinks={"counts": sink})

    def each_batch(batch_df: Any, batch_id: int) -> None:
        batch_id = int(batch_id)
        say("batch", batch_id, "start")
        at("batch-start", batch_id)
        runner(batch_df, batch_id)
        progress = runner.last_progress
        assert progress is not None and progress.batch_id == batch_id
        say("batch", batch_id, "done", f"skipped={int(progress.skipped)}",
            f"committed={runner.committed_batch_id}")
        at("after-runner", batch_id)

    try:
        stream = (spark.readStream.schema(kafka_schema()).option("maxFilesPerTrigger", 1)
                  .parquet(str(work / "input")))
        query = (stream.writeStream.foreachBatch(each_batch)
                 .option("checkpointLocation", str(work / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        totals = runner.totals
        say("finished", f"batches={totals.batches}",
            f"records_in={sum(totals.records_in.values())}")
    finally:
        runner.close()
        spark.stop()


if __name__ == "__main__":
    if len(sys.argv) not in (2, 4):
        raise SystemExit(f"usage: python -m tests.spark.runner_child WORK [POINT BATCH]; "
                         f"points: {', '.join(POINTS)}")
    main(Path(sys.argv[1]).resolve(), kill_point(sys.argv[2:]))
