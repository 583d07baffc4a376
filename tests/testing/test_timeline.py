"""``TopologyTestDriver.timeline()``: what a recording driver keeps, and its SVG picture."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from suppress import BufferConfig, Suppressed
from topology import StreamsBuilder, TimeWindows, Topology, TopologyTestDriver
from topology.testing.timeline import InputEvent, LateDropEvent, OutputEvent, Timeline

SVG = "{http://www.w3.org/2000/svg}"


def counts(windows: TimeWindows) -> Topology:
    b = StreamsBuilder()
    table = b.stream("in").group_by_key().windowed_by(windows).count(late_records_to="late")
    table.to_stream().to("updates")
    table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to(
        "final")
    return b.build()


def scenario(batch: bool = False) -> Timeline:
    """5 s windows, 1 s grace; an out-of-order record (accepted) and a late one (dropped)."""
    records = [("a", "v", 1_000), ("b", "v", 2_000), ("a", "v", 5_500),
               ("a", "v", 4_500),   # out of order, within the grace of [0, 5000): counted
               ("b", "v", 7_000),   # T = 7000 >= 5000 + 1000: [0, 5000) closes
               ("a", "v", 3_000),   # late: [0, 5000) is closed
               ("b", "v", 12_000)]  # closes [5000, 10000)
    with TopologyTestDriver(counts(TimeWindows.of_size_and_grace(5_000, 1_000)),
                            {"record_timeline": True}) as d:
        inp = d.create_input_topic("in")
        if batch:
            inp.pipe_records(records)
        else:
            for key, value, ts in records:
                inp.pipe_input(key, value, ts)
        return d.timeline()


def test_events() -> None:
    tl = scenario()
    assert [(e.arrival, e.key, e.timestamp, e.stream_time) for e in tl.inputs] == [
        (0, "a", 1_000, 1_000), (1, "b", 2_000, 2_000), (2, "a", 5_500, 5_500),
        (3, "a", 4_500, 5_500), (4, "b", 7_000, 7_000), (5, "a", 3_000, 7_000),
        (6, "b", 12_000, 12_000)]
    assert [(e.arrival, e.key, e.start, e.end, e.value) for e in tl.final_results] == [
        (4, "a", 0, 5_000, 2), (4, "b", 0, 5_000, 1),
        (6, "a", 5_000, 10_000, 1), (6, "b", 5_000, 10_000, 1)]
    assert tl.late_drops == [LateDropEvent(5, "a", 3_000, 0, 5_000, 7_000)]
    assert all(e.topic == "updates" for e in tl.outputs if not e.final)
    # in the order they happened: an input, then what it caused
    kinds = [type(e).__name__ for e in tl.events if e.arrival == 5]
    assert kinds == ["InputEvent", "LateDropEvent"]
    assert tl.keys() == ["a", "b"]


def test_batches_and_single_records_record_alike() -> None:
    assert scenario(batch=True).events == scenario().events


def test_svg_parses_with_a_lane_per_key_and_a_marker_per_record() -> None:
    tl = scenario()
    root = ET.fromstring(tl.to_svg())
    assert root.tag == f"{SVG}svg"

    def of_class(name: str) -> list[ET.Element]:
        return [el for el in root.iter() if el.get("class") == name]

    assert [el.text for el in of_class("lane")] == ["a", "b"]
    assert len(of_class("record")) == 7
    assert len(of_class("arrival")) == 7  # the stream-time strip: one dot per arrival
    assert len(of_class("late")) == 1
    assert len(of_class("final")) == 4
    assert len(of_class("close")) == 4  # every window with a final result closed
    assert len(of_class("window")) == 5  # a: [0,5) [5,10); b: [0,5) [5,10) [10,15)
    assert len(of_class("stream-time")) == 1
    texts = [el.text for el in root.iter(f"{SVG}text")]
    assert "2" in texts  # the final count of a's [0, 5000)
    assert "late drop" in texts and "final result" in texts  # the legend


def test_svg_is_deterministic_and_escaped() -> None:
    assert scenario().to_svg() == scenario().to_svg()
    tl = Timeline([InputEvent(0, "in", "<k&'\">", 5, 5)])
    root = ET.fromstring(tl.to_svg())
    assert "<k&'\">" in [el.text for el in root.iter(f"{SVG}text")]


def test_empty_timeline_draws() -> None:
    ET.fromstring(Timeline([]).to_svg())
    with TopologyTestDriver(counts(TimeWindows.of_size_with_no_grace(10)),
                            {"record_timeline": True}) as d:
        assert d.timeline().events == []


def test_save_writes_svg(tmp_path: Path) -> None:
    path = tmp_path / "run.svg"
    scenario().save(path)
    assert ET.parse(path).getroot().tag == f"{SVG}svg"
    with pytest.raises(ValueError, match=r"\.svg or \.png"):
        scenario().save(tmp_path / "run.gif")


def test_png_without_matplotlib_names_the_extra(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(ImportError, match=r"suppress-topology\[plot\]"):
        scenario().save(tmp_path / "run.png")
    assert not (tmp_path / "run.png").exists()


def test_png_with_matplotlib(tmp_path: Path) -> None:
    path = tmp_path / "run.png"
    scenario().save(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_needs_the_config() -> None:
    with TopologyTestDriver(counts(TimeWindows.of_size_with_no_grace(10))) as d:
        with pytest.raises(RuntimeError, match="record_timeline"):
            d.timeline()
    with pytest.raises(ValueError, match="record_timeline"):
        TopologyTestDriver(counts(TimeWindows.of_size_with_no_grace(10)),
                           {"record_timeline": 1})


def test_snapshot_and_wall_clock_outputs() -> None:
    idle = Suppressed.until_window_closes(BufferConfig.unbounded()).with_idle_close(3_000)
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).count()
     .suppress(idle).to_stream().to("final"))
    with TopologyTestDriver(b.build(), {"record_timeline": True},
                            initial_wall_clock_ms=0) as d:
        d.create_input_topic("in").pipe_input("k", "v", 3)
        before = d.timeline()
        d.create_output_topic("final")  # reading does not hide records from the timeline
        d.advance_wall_clock_time(3_000)
        assert d.create_output_topic("final").read_values_to_list() == [1]
        after = d.timeline()
    assert len(before.events) == 1  # a snapshot
    (final,) = after.final_results
    # written by the wall-clock advance, after input 0, at the suppression's stream time
    assert (final.arrival, final.start, final.end, final.stream_time) == (0, 0, 10, 3_003)


def test_unknown_topic_is_not_recorded() -> None:
    from topology.errors import UnknownTopicError

    with TopologyTestDriver(counts(TimeWindows.of_size_with_no_grace(10)),
                            {"record_timeline": True}) as d:
        with pytest.raises(UnknownTopicError):
            d.create_input_topic("nope").pipe_input("k", "v", 1)
        with pytest.raises(UnknownTopicError):
            d.create_input_topic("nope").pipe_records([("k", "v", 1)])
        d.create_input_topic("in").pipe_input("k", "v", 1)
        assert [e.arrival for e in d.timeline().inputs] == [0]


def test_output_event_fields() -> None:
    (first, *_) = scenario().outputs
    assert first == OutputEvent(0, "updates", "a", 0, 5_000, 1, 1_000, False, 1_000)
