"""Processor- and buffer-level conformance scenarios, fed straight into the suppress engine.

Data: tests/data/suppress_scenarios.json (a copy of the shared conformance file). Scenarios
with ``level == "processor"`` that feed the suppress processor and every ``level == "buffer"``
scenario run here; DSL scenarios run in test_suppress_dsl.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from suppress import BufferConfig, BufferFullError, Suppressed
from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor

DATA = Path(__file__).parent.parent / "data" / "suppress_scenarios.json"
SCENARIOS = {s["name"]: s for s in json.loads(DATA.read_text())["scenarios"]}

PROCESSOR = sorted(n for n, s in SCENARIOS.items()
                   if s["level"] == "processor" and n.startswith("proc_"))
BUFFER = sorted(n for n, s in SCENARIOS.items() if s["level"] == "buffer")
LONG = struct.Struct(">q")


def test_scenario_sets_are_not_empty() -> None:
    assert len(PROCESSOR) == 16
    assert len(BUFFER) == 5


def _long(v: int) -> bytes:
    return LONG.pack(v)


def _key(raw: Any, serde: str) -> tuple[Any, bytes, int | None]:
    """(key object, key bytes, exclusive window end or None)."""
    if serde == "string":
        return raw, raw.encode(), None
    inner = raw["key"].encode()
    if serde == "time_windowed_string":
        return (raw["key"], raw["start"], raw["end"]), inner + _long(raw["start"]), raw["end"]
    assert serde == "session_windowed_string"
    return ((raw["key"], raw["start"], raw["end"]), inner + _long(raw["end"]) + _long(raw["start"]),
            raw["end"] + 1)


def _buffer_config(cfg: dict[str, Any]) -> BufferConfig:
    if "max_records" in cfg:
        base: BufferConfig = BufferConfig.max_records(cfg["max_records"])
    elif "max_bytes" in cfg:
        base = BufferConfig.max_bytes(cfg["max_bytes"])
    else:
        return BufferConfig.unbounded()
    return base.emit_early_when_full() if cfg["full"] == "emit" else base.shut_down_when_full()


def _as_key(obj: Any) -> Any:
    if isinstance(obj, tuple):
        return {"key": obj[0], "start": obj[1], "end": obj[2]}
    return obj


@pytest.mark.parametrize("name", PROCESSOR)
def test_processor_scenario(name: str) -> None:
    scenario = SCENARIOS[name]
    cfg = scenario["topology"]["config"]
    buffer_cfg = _buffer_config(cfg)
    if cfg["mode"] == "final":
        suppressed = Suppressed.until_window_closes(buffer_cfg)
    else:
        suppressed = Suppressed.until_time_limit(cfg["duration"], buffer_cfg)
    emitted: list[list[Any]] = []

    def emit(key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        row = [_as_key(key), {"new": new, "old": old}, ctx.timestamp]
        if ctx.headers:
            row.append([[k, v.decode()] for k, v in ctx.headers])
        emitted.append(row)

    def key_serializer(key: Any) -> bytes:
        return _key(_as_key(key), cfg["key_serde"])[1]

    proc = SuppressProcessor(cfg.get("node_name", "KTABLE-SUPPRESS-0000000001"), suppressed,
                             cfg["duration"], emit, key_serializer, _long, debug_metrics=True)
    error = scenario.get("expected_error")
    metrics = scenario.get("expected_metrics", {})
    for i, rec in enumerate(scenario["inputs"]):
        key, _, end = _key(rec["key"], cfg["key_serde"])
        headers = tuple((k, v.encode()) for k, v in rec.get("headers", []))
        ctx = RecordContext(rec["ts"], rec.get("offset", 0), rec.get("topic", ""), 0, headers)
        buffer_time = end if cfg["mode"] == "final" else rec["ts"]
        if error and i == error["raised_on_input_index"]:
            with pytest.raises(BufferFullError) as info:
                proc.process(key, rec["new"], rec["old"], ctx, buffer_time)
            assert error["message_contains"] in str(info.value)
            if "full_message" in error:
                assert str(info.value) == error["full_message"]
            assert key in proc.buffer  # the offending record stays buffered
            proc.buffer._check()
            break
        proc.process(key, rec["new"], rec["old"], ctx, buffer_time)
        proc.buffer._check()
        if "buffer_sizes_after_each_put" in scenario:
            put_sizes = scenario["buffer_sizes_after_each_put"]
            assert proc.metrics.as_dict()["suppression-buffer-size-max"] >= put_sizes[i]
        for metric, value in metrics.get(f"after_input_{i}", {}).items():
            assert proc.metrics.as_dict()[metric] == pytest.approx(value), metric
    assert emitted == [list(row) for row in scenario["expected_outputs"]]


def _put(buf: TimeOrderedBuffer, row: list[Any], topic: str = "topic") -> None:
    time, ts, key, value = row
    buf.put(time, key, value, None, RecordContext(ts, 0, topic, 0, ()))
    buf._check()


def _utf8(v: str) -> bytes:
    return v.encode()


def test_buffer_track_size() -> None:
    s = SCENARIOS["buffer_track_size"]
    buf = TimeOrderedBuffer(_utf8, _utf8, track_bytes=True)
    sizes = []
    for row in s["inputs"]:
        _put(buf, row)
        sizes.append(buf.size_bytes)
    assert sizes == s["expected_outputs"]
    assert buf.get("asdf").time == 0  # re-put keeps the original buffer time


def test_buffer_evict_oldest_order_and_sizes() -> None:
    s = SCENARIOS["buffer_evict_oldest_order_and_sizes"]
    exp = s["expected_outputs"]
    buf = TimeOrderedBuffer(_utf8, _utf8, track_bytes=True)
    sizes, mins = [], []
    for row in s["inputs"]:
        _put(buf, row)
        sizes.append(buf.size_bytes)
        mins.append(buf.min_time)
    assert sizes == exp["sizes_after_puts"]
    assert mins == exp["min_timestamp_after_puts"]
    seen = []
    buf.evict_while(lambda: True, lambda e: seen.append(
        {"key": e.key, "numRecords": buf.num_records, "bufferSize": buf.size_bytes,
         "minTimestamp": buf.min_time}))
    assert [x["key"] for x in seen] == exp["eviction_order"]
    assert seen == exp["state_seen_by_callback"]
    assert {"numRecords": buf.num_records, "bufferSize": buf.size_bytes,
            "minTimestamp": buf.min_time} == exp["after"]
    buf._check()


def test_buffer_respect_eviction_predicate() -> None:
    s = SCENARIOS["buffer_respect_eviction_predicate"]
    buf = TimeOrderedBuffer(_utf8, _utf8, track_bytes=True)
    for row in s["inputs"]:
        _put(buf, row)
    out = []
    buf.evict_while(lambda: buf.num_records > 1, lambda e: out.append(
        [e.key, {"new": e.new, "old": e.old}, e.context.timestamp]))
    assert out == s["expected_outputs"]
    buf._check()


@pytest.mark.parametrize(("puts", "reading", "expected"), [
    ("count_puts", "num_records", "numRecords"),
    ("min_ts_puts", "min_time", "minTimestamp"),
])
def test_buffer_track_count_and_min_timestamp(puts: str, reading: str, expected: str) -> None:
    s = SCENARIOS["buffer_track_count_and_min_timestamp"]
    buf = TimeOrderedBuffer(_utf8, _utf8, track_bytes=True)
    seen = []
    for row in s["inputs"][puts]:
        _put(buf, row)
        seen.append(getattr(buf, reading))
    assert seen == s["expected_outputs"][expected]


def test_buffer_prior_value_for_buffered() -> None:
    s = SCENARIOS["buffer_prior_value_for_buffered"]
    buf = TimeOrderedBuffer(_utf8, _utf8, track_bytes=True)
    for step in s["inputs"]:
        time, key, change = step["put"]
        buf.put(time, key, change["new"], change["old"],
                RecordContext(time, 0, "topic", 0, ()))
        buf._check()
    for key, exp in s["expected_outputs"].items():
        defined, value = buf.prior_value(key)
        assert defined == exp["defined"]
        if defined:
            assert value == exp["value"]
