"""Session stores in a running topology: the spec, the processor API, the driver's getter,
and a persistent store restored when the driver reopens its state directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topology import (
    Consumed,
    Processor,
    Record,
    Serdes,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
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
    b.add_store(session_store_spec("sessions", Serdes.string(), 100, persistent))
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
        assert sessions(driver) == [("[a@0/11]", 4), ("[a@30/30]", 1), ("[b@3/3]", 1)]
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
