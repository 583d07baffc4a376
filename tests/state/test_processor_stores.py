"""Window and session stores in a running topology: added for processors, read through the
processor API and the driver's getters (both directions), in memory and on RocksDB (restored
when the driver reopens its state directory)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from topology import (
    Consumed,
    Materialized,
    Processor,
    Record,
    Serdes,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from topology.errors import TopologyError
from topology.runtime.store_specs import session_store_spec
from topology.state.memory import InMemorySessionStore
from topology.state.rocksdb import RocksDBSessionStore
from topology.windows import Window, Windowed

GAP = 5


class Sessionize(Processor):
    """Counts records per session of activity (records at most ``GAP`` ms apart merge)."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("sessions")

    def process(self, record: Record) -> None:
        t = record.timestamp
        start, end, count = t, t, 1
        for session, n in list(self.store.find_sessions(record.key, t - GAP, t + GAP)):
            start = min(start, session.window.start)
            end = max(end, session.window.end)
            count += n
            self.store.remove(session)
        self.store.put(Windowed(record.key, Window(start, end)), count)


def build(persistent: bool | None = None) -> Topology:
    b = StreamsBuilder()
    b.add_session_store(Materialized(name="sessions", key_serde=Serdes.string(),
                                     persistence=persistent), retention=100)
    strings = Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())
    b.stream("clicks", strings).process(Sessionize, "sessions")
    return b.build()


def pipe(driver: TopologyTestDriver, rows: list[tuple[str, int]]) -> None:
    topic = driver.create_input_topic("clicks", Serdes.string(), Serdes.string())
    for key, t in rows:
        topic.pipe_input(key, "x", timestamp=t)


def sessions(driver: TopologyTestDriver) -> list[tuple[str, int]]:
    return [(str(w), n) for w, n in driver.get_session_store("sessions").all()]


def test_a_processor_merges_sessions_through_the_store() -> None:
    with TopologyTestDriver(build()) as driver:
        pipe(driver, [("a", 0), ("a", 5), ("b", 3), ("a", 11), ("a", 30), ("a", 8)])
        store = driver.get_session_store("sessions")
        assert isinstance(store, InMemorySessionStore)
        # 0, 5, 8 and 11 chain within the gap; 30 is a session of its own
        # Kafka's in-memory order: by session end, then key, then start
        assert sessions(driver) == [("[b@3/3]", 1), ("[a@0/11]", 4), ("[a@30/30]", 1)]
        assert [str(w) for w, _ in store.backward_fetch("a")] == ["[a@30/30]", "[a@0/11]"]
        assert driver.get_window_store("sessions") is None
        with pytest.raises(ValueError, match="get_session_store"):
            driver.get_state_store("sessions")


def test_a_persistent_session_store_is_restored_on_reopen(tmp_path: Path) -> None:
    with TopologyTestDriver(build(), state_dir=tmp_path) as driver:
        pipe(driver, [("a", 0), ("a", 5), ("b", 3)])
        assert isinstance(driver.get_session_store("sessions"), RocksDBSessionStore)
    with TopologyTestDriver(build(), state_dir=tmp_path) as driver:
        assert sessions(driver) == [("[a@0/5]", 2), ("[b@3/3]", 1)]
        pipe(driver, [("a", 9), ("a", 200)])  # 200 expires every session ending before 101
        assert sessions(driver) == [("[a@200/200]", 1)]
        assert driver.get_session_store("sessions").observed_stream_time == 200


def test_the_spec_checks_its_arguments_when_the_topology_is_defined() -> None:
    with pytest.raises(ValueError, match="retention_ms"):
        session_store_spec("s", Serdes.string(), -1)
    with pytest.raises(TypeError, match="retention_ms"):
        session_store_spec("s", Serdes.string(), 1.5)  # type: ignore[arg-type]
    b = StreamsBuilder()
    with pytest.raises(ValueError, match="negative"):
        b.add_session_store(Materialized(name="s"), retention=-1)
    with pytest.raises(TypeError, match="retention"):
        b.add_session_store(Materialized(name="s"), retention=1.5)  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="needs Materialized"):
        b.add_session_store(Materialized(), retention=1)
    with pytest.raises(ValueError, match="window_size must be larger than zero"):
        b.add_window_store(Materialized(name="w"), window_size=0, retention=1)
    b.add_window_store(Materialized(name="w"), window_size=10, retention=timedelta(seconds=1))
    with pytest.raises(TopologyError, match="already exists"):
        b.add_session_store(Materialized(name="w"), retention=1)


class LastSeen(Processor):
    """Keeps each key's last value in 10 ms windows; forwards the key's windows newest first."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("windows")

    def process(self, record: Record) -> None:
        self.store.put(record.key, record.value, record.timestamp // 10 * 10)
        newest_first = [(w.window.start, v) for w, v in
                        self.store.backward_fetch(record.key, record.key, None, None)]
        self.context.forward(record.with_value(newest_first))


@pytest.mark.parametrize("state_dir", [False, True])
def test_a_processor_reads_a_window_store_both_ways(tmp_path: Path, state_dir: bool) -> None:
    b = StreamsBuilder()
    b.add_window_store(Materialized(name="windows", key_serde=Serdes.string()),
                       window_size=10, retention=31)
    strings = Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())
    b.stream("in", strings).process(LastSeen, "windows").to("out")
    with TopologyTestDriver(b.build(), state_dir=tmp_path if state_dir else None) as driver:
        topic = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for key, value, t in [("a", "x", 1), ("b", "y", 12), ("a", "z", 15), ("a", "w", 41)]:
            topic.pipe_input(key, value, timestamp=t)
        assert driver.create_output_topic("out").read_values_to_list() == [
            [(0, "x")], [(10, "y")], [(10, "z"), (0, "x")], [(40, "w"), (10, "z")]]
        store = driver.get_window_store("windows")
        assert store.persistent is state_dir
        # Kafka's orders: in memory by start, then key; RocksDB by segment, key, then start
        want = (["[a@10/20]", "[a@40/50]", "[b@10/20]"] if state_dir
                else ["[a@10/20]", "[b@10/20]", "[a@40/50]"])
        assert [str(w) for w, _ in store.fetch(None, None, None, None)] == want
        assert [str(w) for w, _ in store.backward_all()] == want[::-1]
