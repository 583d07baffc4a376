"""User code type-checks under ``mypy --strict`` with the key and value types it should infer.

The snippets, and every example of docs/ and the README, are a user's files in a directory
of their own (no project config), checked the
way the README's setup checks them: ``topology`` must be found through the installed
distribution (an editable install included), and the DSL's generic types must carry the
serdes' types through every step. A mistyped lambda must be an error, so the check cannot
pass vacuously. One mypy run checks every file. Its cache (``.mypy_cache/user-files``,
ignored) outlives the run, so that a later run checks only what changed: mypy validates what
it reads from it.
"""

from __future__ import annotations

import doctest
import re
import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent
MYPY_CACHE = ROOT / ".mypy_cache" / "user-files"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

INFERRED = textwrap.dedent('''
    from typing import Any, assert_type

    from suppress import BufferConfig, Suppressed
    from topology import (Consumed, Grouped, KGroupedStream, KGroupedTable, KStream, KTable,
                          Materialized, Produced, Serdes, SessionWindowedKStream,
                          SessionWindows, StreamsBuilder, TimeWindowedKStream, TimeWindows,
                          TopologyTestDriver, Windowed)
    from topology.state.api import (KeyValueStore, SessionStore, VersionedKeyValueStore,
                                    WindowStore)

    b = StreamsBuilder()
    s = b.stream("t", Consumed(key_serde=Serdes.string(), value_serde=Serdes.long()))
    assert_type(s, KStream[str, int])
    assert_type(b.stream("u"), KStream[Any, Any])
    assert_type(b.stream("v", Consumed(key_serde=Serdes.string())), KStream[str, Any])
    assert_type(s.filter(lambda k, v: v > 0), KStream[str, int])
    assert_type(s.filter_not(lambda k, v: k == "x"), KStream[str, int])
    assert_type(s.map_values(lambda v: str(v)), KStream[str, str])
    assert_type(s.map(lambda k, v: (v, k)), KStream[int, str])
    assert_type(s.flat_map(lambda k, v: [(v, 1.5)]), KStream[int, float])
    assert_type(s.flat_map_values(lambda v: [v, v]), KStream[str, int])
    assert_type(s.select_key(lambda k, v: len(k)), KStream[int, int])
    assert_type(s.peek(lambda k, v: None).merge(s), KStream[str, int])
    s.to("out", Produced(Serdes.string(), Serdes.long()))

    grouped = s.group_by_key()
    assert_type(grouped, KGroupedStream[str, int])
    assert_type(s.group_by(lambda k, v: v, Grouped(name="by-value")), KGroupedStream[int, int])
    assert_type(grouped.count(), KTable[str, int])
    assert_type(grouped.reduce(lambda a, v: a + v), KTable[str, int])
    assert_type(grouped.aggregate(lambda: 0.0, lambda k, v, agg: agg + v), KTable[str, float])
    # where the aggregate's type flows through an operator, the target's type guides mypy
    joined: KTable[str, str] = grouped.aggregate(lambda: "", lambda k, v, agg: agg + str(v))

    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000))
    assert_type(windowed, TimeWindowedKStream[str, int])
    counts = windowed.count()
    assert_type(counts, KTable[Windowed[str], int])
    final = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    assert_type(final, KTable[Windowed[str], int])
    assert_type(final.to_stream(), KStream[Windowed[str], int])
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5_000))
    assert_type(sessions, SessionWindowedKStream[str, int])
    assert_type(sessions.count(), KTable[Windowed[str], int])
    merged: KTable[Windowed[str], str] = sessions.aggregate(
        lambda: "", lambda k, v, agg: agg + str(v), lambda k, a1, a2: a1 + a2)
    assert_type(sessions.reduce(max), KTable[Windowed[str], int])

    rates = b.table("rates", Consumed(Serdes.string(), Serdes.double()), Materialized("rates"))
    assert_type(rates, KTable[str, float])
    assert_type(s.join(rates, lambda v, rate: v * rate), KStream[str, float])
    assert_type(s.left_join(rates, lambda v, rate: None if rate is None else v * rate),
                KStream[str, float | None])
    assert_type(rates.map_values(lambda r: r > 1), KTable[str, bool])
    assert_type(rates.join(rates, lambda a, c: (a, c)), KTable[str, tuple[float, float]])
    assert_type(rates.outer_join(rates, lambda a, c: a or c), KTable[str, float | None])
    regrouped = rates.group_by(lambda k, v: (k[:1], v))
    assert_type(regrouped, KGroupedTable[str, float])
    assert_type(regrouped.reduce(lambda a, v: a + v, lambda a, v: a - v), KTable[str, float])
    assert_type(regrouped.count(), KTable[str, int])

    with TopologyTestDriver(b.build()) as driver:
        assert_type(driver.get_key_value_store("rates"), KeyValueStore[Any, Any] | None)
        assert_type(driver.get_window_store("w"), WindowStore[Any, Any] | None)
        assert_type(driver.get_session_store("s"), SessionStore[Any, Any] | None)
        assert_type(driver.get_versioned_key_value_store("v"), VersionedKeyValueStore | None)
        store = driver.get_key_value_store("rates")
        assert store is not None
        rows: list[tuple[Any, Any]] = list(store.all())
        window_store = driver.get_window_store("w")
        assert window_store is not None
        value: object = window_store.fetch("k", 0)
        session_store = driver.get_session_store("s")
        assert session_store is not None
        found = list(session_store.find_sessions("k", 0, 10))
''')

MISTYPED = textwrap.dedent('''
    from topology import Consumed, KTable, Serdes, StreamsBuilder

    s = StreamsBuilder().stream("t", Consumed(Serdes.string(), Serdes.string()))
    s.map_values(lambda v: v + 1)
    s.group_by_key().count().to_stream().map_values(lambda n: n.upper())
    bad: KTable[str, int] = s.group_by_key().aggregate(lambda: 0, lambda k, v, agg: agg + v)
''')


def _docs_files() -> dict[str, str]:
    """Every python block of docs/ and the README, each a file of its own (as test_docs runs
    them); a doctest block as the script of its examples."""
    files = {}
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        blocks = BLOCK.findall(page.read_text(encoding="utf-8"))
        for i, code in enumerate(blocks):
            if code.lstrip().startswith(">>>"):
                code = doctest.script_from_examples(code)
            files[f"docs_{page.stem.replace('-', '_')}_{i}.py"] = code
    assert any(name.startswith("docs_README") for name in files), "README.md has no block"
    return files


def test_user_files_type_check_strictly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    files = {"inferred.py": INFERRED, "mistyped.py": MISTYPED, **_docs_files()}
    for name, code in files.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # a user's directory: no project config, topology installed
    out, err, _ = mypy_api.run(["--strict", "--cache-dir", str(MYPY_CACHE),
                                "--no-error-summary", *files])
    report = out + err
    errors = [line for line in report.splitlines() if ": error:" in line]
    assert "Cannot find implementation or library stub" not in report, report
    assert [e for e in errors if not e.startswith("mistyped.py:")] == [], report
    mistyped = {int(e.split(":")[1]) for e in errors if e.startswith("mistyped.py:")}
    # line 5: str + int in the lambda; line 6: a count is an int, which has no upper();
    # line 7: the aggregate is an int, the values str
    assert mistyped == {5, 6, 7}, report
