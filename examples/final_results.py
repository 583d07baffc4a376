"""Main example: one final click count per user and minute, emitted when the minute closes.

Run it with ``make example``. It pipes a small, out-of-order click stream through the test
driver and prints every final window it emitted, plus the late records it dropped.
"""

from __future__ import annotations

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)

MINUTE = 60_000

CLICKS = [  # (user, page, timestamp ms)
    ("alice", "/home", 1_000),
    ("bob", "/home", 5_000),
    ("alice", "/cart", 30_000),
    ("alice", "/pay", 61_000),     # next minute
    ("bob", "/cart", 55_000),      # out of order, still within grace
    ("carol", "/home", 75_000),    # stream time 75 s: minute [0, 60 s) closes (grace 10 s)
    ("bob", "/late", 20_000),      # too late: its window closed; counted as dropped
    ("carol", "/cart", 130_000),   # closes minute [60 s, 120 s)
]


def build() -> StreamsBuilder:
    b = StreamsBuilder()
    (
        b.stream("clicks", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE, 10_000))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("clicks-per-minute")
    )
    return b


def main() -> None:
    topology = build().build()
    print(topology.describe())
    with TopologyTestDriver(topology, initial_wall_clock_ms=0) as driver:
        clicks = driver.create_input_topic("clicks", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("clicks-per-minute")
        for user, page, ts in CLICKS:
            clicks.pipe_input(user, page, timestamp=ts)
        print("Final windows emitted:")
        for record in out.read_records_to_list():
            w = record.key.window
            print(f"  user={record.key.key:<6} "
                  f"window=[{w.start // 1000:>3} s, {w.end // 1000:>3} s)  "
                  f"clicks={record.value}  (last click at {record.timestamp / 1000:.0f} s)")
        dropped = driver.metrics()["dropped-records-total"]
        print(f"Late records dropped: {dropped:.0f}")


if __name__ == "__main__":
    main()
