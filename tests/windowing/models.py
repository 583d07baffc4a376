"""Shared pieces of the windowing tests: topologies and brute-force models of the windows."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from suppress import BufferConfig, Suppressed
from topology import Materialized, StreamsBuilder, Topology, TopologyTestDriver, Windowed

Row = tuple[str, int, int, int, int]
"""``(key, start, end, count, timestamp)`` of a window's final result (inclusive end)."""

FLUSH_KEY = "~flush"


def final_counts_topology(windows: Any, *, persistent: bool | None = None,
                          late_records_to: str | None = None,
                          suppressed: Suppressed | None = None, raw: bool = True) -> Topology:
    """``stream('in').group_by_key().windowed_by(windows).count()`` and final results.

    Raw updates (unless ``raw`` is false: then the suppression is the aggregation's only
    child, and may run fused) and final results are written to ``all`` (values tagged
    ``raw``/``final``), final results to ``final`` too.
    """
    b = StreamsBuilder()
    counts = b.stream("in").group_by_key().windowed_by(windows).count(
        Materialized(name="counts", persistence=persistent), late_records_to=late_records_to)
    if raw:
        counts.to_stream().map_values(lambda v: ("raw", v)).to("all")
    final = counts.suppress(suppressed or Suppressed.until_window_closes(BufferConfig.unbounded()))
    final.to_stream().map_values(lambda v: ("final", v)).to("all")
    final.to_stream().to("final")
    return b.build()


def rows(records: list[Any]) -> list[Row]:
    """Final results as sorted rows, the flush key's windows left out."""
    out = []
    for r in records:
        key: Windowed = r.key
        if key.key != FLUSH_KEY:
            out.append((key.key, key.window.start, key.window.end, r.value, r.timestamp))
    return sorted(out)


def run(topology: Topology, records: list[tuple[str, int]], flush_at: int | None,
        state_dir: Any = None) -> tuple[list[Any], list[Any], TopologyTestDriver]:
    """Pipe ``(key, ts)`` records one by one; return (``all`` records, ``final`` records).

    The driver is returned open (the caller closes it). ``flush_at``: a last record of
    :data:`FLUSH_KEY` at that time.
    """
    driver = TopologyTestDriver(topology, state_dir=state_dir)
    source = driver.create_input_topic("in")
    for key, ts in records:
        source.pipe_input(key, "v", ts)
    if flush_at is not None:
        source.pipe_input(FLUSH_KEY, "v", flush_at)
    everything = driver.create_output_topic("all").read_records_to_list()
    final = driver.create_output_topic("final").read_records_to_list()
    return everything, final, driver


def final_across_restarts(windows: Any, parts: list[list[tuple[str, int]]], flush_at: int,
                          state_dir: Any) -> tuple[list[Row], list[Row]]:
    """Final results of one uninterrupted run over the parts' records, and of durable drivers
    on ``state_dir``, one closed after each part, then one that only flushes."""
    data = [record for part in parts for record in part]
    _, expected, whole = run(final_counts_topology(windows), data, flush_at=flush_at)
    whole.close()
    got: list[Any] = []
    for part in [*parts, []]:
        _, final, driver = run(final_counts_topology(windows), part,
                               flush_at=None if part else flush_at, state_dir=state_dir)
        got += final
        driver.close()
    return rows(expected), rows(got)


def no_update_after_final(everything: list[Any]) -> None:
    """Assert that no window is emitted twice, nor updated after its final result."""
    emitted: set[Any] = set()
    for r in everything:
        tag, _ = r.value
        assert r.key not in emitted, f"{r.key} {tag} after its final result"
        if tag == "final":
            emitted.add(r.key)


def sliding_model(records: list[tuple[str, int]], d: int) -> list[Row]:
    """Kafka's sliding windows of in-grace records, by brute force.

    Per key: each record at ``t`` has its left window ``[t - d, t]`` (``[0, d]`` when
    ``t < d``), and a right window ``[t + 1, t + 1 + d]`` when a record of the key lies in
    it; a window's count is the number of records in it, its timestamp their largest.
    """
    by_key: dict[str, list[int]] = defaultdict(list)
    for key, ts in records:
        by_key[key].append(ts)
    out: list[Row] = []
    for key, times in by_key.items():
        starts: set[int] = set()
        for t in times:
            starts.add(max(0, t - d))
            if any(t < u <= t + 1 + d for u in times):
                starts.add(t + 1)
        for s in starts:
            inside = [u for u in times if s <= u <= s + d]
            out.append((key, s, s + d, len(inside), max(inside)))
    return sorted(out)


def session_model(records: list[tuple[str, int]], gap: int) -> list[Row]:
    """Sessions of in-grace records by brute force: records ``gap`` apart or closer merge."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for key, ts in records:
        by_key[key].append(ts)
    out: list[Row] = []
    for key, times in by_key.items():
        times.sort()
        session = [times[0]]
        for t in times[1:]:
            if t - session[-1] <= gap:
                session.append(t)
            else:
                out.append((key, session[0], session[-1], len(session), session[-1]))
                session = [t]
        out.append((key, session[0], session[-1], len(session), session[-1]))
    return sorted(out)
