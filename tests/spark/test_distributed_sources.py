"""DistributedRunner: one DataFrame holding several topics, read once; metrics across restarts.

The sources are small Parquet files in Spark's Kafka source schema (one micro-batch each, in
timestamp order), each holding the records of every topic of its time range, as a Kafka
source subscribed to those topics gives them.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from suppress import BufferConfig, Suppressed
from topology import Consumed, Serdes, StreamsBuilder, TimeWindows, Topology
from topology.spark import ColumnMappingError, Columns, DistributedRunner, sinks
from topology.spark.distributed import METRICS_FILE

from .harness import chunk_table, distributed_run
from .helpers import Row, batches, kafka_df, kafka_table
from .test_distributed import (
    as_multiset,
    click_rows,
    driver_records,
    stream_of,
    write_parquet,
)
from .test_distributed_aggregations import sliding_clicks
from .test_foreach_batch import final_counts

S = Serdes.string()


def merged_counts(branch: bool = True) -> Topology:
    """Clicks and taps (JSON values) merged into final windowed counts; with ``branch``, the
    taps' pages to a topic of their own as well."""
    b = StreamsBuilder()
    clicks = b.stream("clicks", Consumed(key_serde=S, value_serde=S))
    taps = (b.stream("taps", Consumed(key_serde=S, value_serde=Serdes.json()))
            .map_values(lambda tap: tap["page"]))
    if branch:
        taps.to("tapped")
    (clicks.merge(taps)
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(100, 20))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("counts"))
    return b.build()


def click_and_tap_rows(seed: int, n: int = 200) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for ts in sorted(rng.randrange(1_500) for _ in range(n)):
        user = f"user-{rng.randrange(5)}".encode()
        page = rng.choice(["/a", "/b", "/c"])
        if rng.random() < 0.5:
            rows.append(("clicks", user, page.encode(), ts))
        else:
            rows.append(("taps", user, json.dumps({"page": page}).encode(), ts))
    return rows


def add_file(folder: Path, rows: list[Row], n: int) -> None:
    """One more file, newer than the others (the next micro-batch of the file source)."""
    staged = folder.parent / f".late-{n}.parquet"
    pq.write_table(kafka_table(rows), staged)
    os.utime(staged, (1_000_100 + n, 1_000_100 + n))
    os.rename(staged, folder / f"part-{100 + n}.parquet")


def read_once(runner: DistributedRunner, rows: int) -> None:
    """The query had one source and read each row once."""
    progress = runner.query.recentProgress
    assert progress
    assert {len(p.sources) for p in progress} == {1}
    assert sum(p.numInputRows for p in progress) == rows
    assert runner.metrics()["records-in-total"] == rows


UNREAD_TOPIC = "topic 'payments', which no source of the topology reads"


# -- one DataFrame of several topics ------------------------------------------------------------

def test_one_dataframe_of_two_merged_topics_gives_what_two_dataframes_give(
        spark: Any, tmp_path: Path) -> None:
    """With a side branch beside the window, each branch of the query scans its source (as
    with a DataFrame per topic): no more rows than the two DataFrames' are read."""
    data = click_and_tap_rows(seed=4)
    parts = batches(data, 3)
    write_parquet(tmp_path / "both", [kafka_table(part) for part in parts])
    for topic in ("clicks", "taps"):
        write_parquet(tmp_path / topic, [kafka_table([r for r in part if r[0] == topic])
                                         for part in parts])
    one = {"counts": sinks.memory(), "tapped": sinks.memory()}
    runner = DistributedRunner(merged_counts(), sources=stream_of(spark, tmp_path / "both"),
                               sinks=one, checkpoint_dir=str(tmp_path / "chk-one"))
    runner.run_available()
    two = {"counts": sinks.memory(), "tapped": sinks.memory()}
    per_topic = DistributedRunner(
        merged_counts(), sources={t: stream_of(spark, tmp_path / t) for t in ("clicks", "taps")},
        sinks=two, checkpoint_dir=str(tmp_path / "chk-two"))
    per_topic.run_available()
    assert {len(p.sources) for p in runner.query.recentProgress} == {1}
    assert runner.metrics()["records-in-total"] == per_topic.metrics()["records-in-total"]
    for topic in one:
        expected = as_multiset(driver_records(merged_counts(), data, topic))
        assert len(expected) > 10, topic
        assert as_multiset(one[topic].read_records_to_list()) == expected, topic
        assert as_multiset(two[topic].read_records_to_list()) == expected, topic


def test_a_record_of_a_topic_the_topology_does_not_read_fails_the_query(
        spark: Any, tmp_path: Path) -> None:
    data = [*click_rows(seed=2, n=20), ("payments", b"p1", b"{}", 2_000)]
    write_parquet(tmp_path / "in", [kafka_table(data)])
    runner = DistributedRunner(merged_counts(), sources=stream_of(spark, tmp_path / "in"),
                               sinks={t: sinks.memory() for t in merged_counts().sink_topics},
                               checkpoint_dir=str(tmp_path / "chk"))
    with pytest.raises(Exception, match=UNREAD_TOPIC) as failed:
        runner.run_available()
    assert "subscribe only to those topics" in str(failed.value)


def test_a_record_of_a_topic_a_one_source_topology_does_not_read_is_refused() -> None:
    """The runner's own stages, as Spark calls them: a stray topic is refused, not read as
    the one source's."""
    data = [*click_rows(seed=2, n=20), ("payments", b"p1", b"{}", 2_000)]
    with pytest.raises(Exception, match=UNREAD_TOPIC) as failed:
        distributed_run(sliding_clicks("count"), [[chunk_table(data, 0)]])
    assert "subscribe only to those topics" in str(failed.value)


def test_one_dataframe_needs_a_topic_column_for_several_topics(spark: Any,
                                                               tmp_path: Path) -> None:
    write_parquet(tmp_path / "in", [kafka_table(click_and_tap_rows(seed=1, n=5))])
    df = stream_of(spark, tmp_path / "in").drop("topic")
    with pytest.raises(ColumnMappingError, match=r"no topic column, and the topology reads 2 "
                                                 r"topics \(\['clicks', 'taps'\]\)"):
        DistributedRunner(merged_counts(), sources=df,
                          sinks={"counts": sinks.memory(), "tapped": sinks.memory()},
                          checkpoint_dir=str(tmp_path / "chk"))
    with pytest.raises(ColumnMappingError, match="no column 'source'"):
        DistributedRunner(merged_counts(), sources=df, columns=Columns(topic="source"),
                          sinks={"counts": sinks.memory(), "tapped": sinks.memory()},
                          checkpoint_dir=str(tmp_path / "chk"))


def test_one_static_dataframe_is_refused(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"^sources must be a streaming DataFrame.*static"):
        DistributedRunner(final_counts(), sources=kafka_df(spark, click_rows(seed=1, n=3)),
                          sinks={"counts": sinks.memory()}, checkpoint_dir=str(tmp_path))


# -- metrics survive restarts ---------------------------------------------------------------------

def test_metrics_continue_on_the_checkpoint_and_count_a_replay_once(spark: Any, tmp_path: Path
                                                                   ) -> None:
    """The checkpoint on a Hadoop ``file:`` URI; one DataFrame of two topics, each row read
    once; a restart adds only the new file's records to the sink and the kept totals."""
    data = click_and_tap_rows(seed=6)
    first, second, third = batches(data, 3)
    folder = tmp_path / "in"
    write_parquet(folder, [kafka_table(first), kafka_table(second)])
    checkpoint = tmp_path / "chk"
    out = sinks.memory()

    def run() -> DistributedRunner:
        runner = DistributedRunner(merged_counts(branch=False), sources=stream_of(spark, folder),
                                   sinks={"counts": out}, checkpoint_dir=checkpoint.as_uri())
        before = runner.metrics()
        runner.run_available()
        assert runner.metrics()["records-in-total"] >= before["records-in-total"]
        return runner

    read_once(run(), len(first) + len(second))
    kept = json.loads((checkpoint / METRICS_FILE).read_text())
    assert kept["records_in"] == len(first) + len(second)
    add_file(folder, third, 0)
    metrics = run().metrics()  # a new runner on the checkpoint starts from the kept totals
    expected = driver_records(merged_counts(False), data, "counts")
    assert len(expected) > 10
    assert as_multiset(out.read_records_to_list()) == as_multiset(expected)
    assert metrics["records-in-total"] == len(data)
    assert metrics["records-out-total"] == len(expected)
    assert run().metrics() == metrics  # nothing new: nothing added
    assert out.is_empty()
    # Spark runs the last micro-batch again (its commit lost): delivered again, counted once
    commits = checkpoint / "commits"
    last = max(int(name) for name in os.listdir(commits) if name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink()
    assert run().metrics() == metrics
    assert (commits / str(last)).exists()
    assert out.queue_size() > 0  # the sink got its windows again
