"""The pipeline the durability tests run, crash and restart: one topology, one input order.

Kept importable from a child process (``python -m tests.durability.pipeline <state_dir>
<records.json>``), which prints ``start <resume index>`` once its driver is open, pipes the
records from the committed offsets on, one call each, and prints ``done`` at the end; the
test kills it at random moments and starts it again.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from suppress import BufferConfig, Suppressed
from topology import Materialized, StreamsBuilder, TimeWindows, Topology, TopologyTestDriver

OUTPUTS = ("final", "limited", "joined")


def topology() -> Topology:
    """Final results of a windowed count, a rate-limited count, and an as-of join."""
    b = StreamsBuilder()
    clicks = b.stream("clicks")
    (clicks.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().map(lambda k, v: (k.key, (k.window.start, v))).to("final"))
    (clicks.group_by_key().count()
     .suppress(Suppressed.until_time_limit(20, BufferConfig.max_records(3)
                                           .emit_early_when_full()))
     .to_stream().to("limited"))
    rates = b.table("rates", materialized=Materialized.versioned("rates", 1_000))
    clicks.join(rates, lambda click, rate: f"{click}@{rate}", grace=3).to("joined")
    return b.build()


def records(n: int, seed: int) -> list[tuple[str, str, str, int]]:
    """``n`` records over two topics, out of order by up to 8 ms, in piping order."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = max(0, i - rng.randrange(9)) if rng.random() < 0.3 else i
        if rng.random() < 0.2:
            out.append(("rates", f"k{rng.randrange(4)}", f"r{i}", ts))
        else:
            out.append(("clicks", f"k{rng.randrange(4)}", f"c{i}", ts))
    return out


def resume_index(committed: dict[str, int]) -> int:
    """Where piping resumes: the records of every topic up to its committed offset."""
    return sum(committed.values())


def pipe_from_committed(driver: TopologyTestDriver, data: list[Any]) -> None:
    """Pipe ``data`` (in order) from the driver's committed offsets on, one call each."""
    topics = {name: driver.create_input_topic(name) for name in ("clicks", "rates")}
    start = resume_index(driver.committed_offsets())
    seen: dict[str, int] = {}
    for topic, _, _, _ in data[:start]:
        seen[topic] = seen.get(topic, 0) + 1
    assert seen == {t: n for t, n in driver.committed_offsets().items() if n}, (
        "committed offsets are not a prefix of the input order")
    for topic, key, value, ts in data[start:]:
        topics[topic].pipe_input(key, value, timestamp=ts)


def read_all(driver: TopologyTestDriver) -> dict[str, list[tuple[Any, Any, int]]]:
    """Every unread output record, per output topic."""
    return {name: [(r.key, r.value, r.timestamp)
                   for r in driver.create_output_topic(name).read_records_to_list()]
            for name in OUTPUTS}


def main(state_dir: str, data_file: str) -> None:
    """The child: pipe what is left, without reading any output."""
    with open(data_file, encoding="utf-8") as fh:
        data = [tuple(r) for r in json.load(fh)]
    with TopologyTestDriver(topology(), state_dir=state_dir) as driver:
        print("start", resume_index(driver.committed_offsets()), flush=True)
        pipe_from_committed(driver, data)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
