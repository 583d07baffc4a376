"""The pytest plugin (entry point ``pytest11``): the ``topology_driver`` fixture and the record
diff of ``assert_records`` and of a failing ``==`` of record lists."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from topology import StreamsBuilder, TestRecord, TopologyTestDriver
from topology.testing import assert_records
from topology.testing.assertions import diff_records
from topology.testing.plugin import DriverFactory, pytest_assertrepr_compare

pytest_plugins = ["pytester"]


def _upper() -> StreamsBuilder:
    b = StreamsBuilder()
    b.stream("in").map_values(str.upper).to("out")
    return b


# -- the fixture, in this process (the plugin is installed) ----------------------------------


def test_fixture_makes_drivers_with_the_driver_arguments(topology_driver: DriverFactory) -> None:
    d = topology_driver(_upper().build(), {"application_id": "app"},
                        initial_wall_clock_ms=5_000)
    assert isinstance(d, TopologyTestDriver)
    assert d.application_id == "app"
    assert d._clock.now_ms() == 5_000
    d.create_input_topic("in").pipe_input("k", "a", timestamp=0)
    assert d.create_output_topic("out").read_key_value() == ("k", "A")
    other = topology_driver(_upper().build())
    assert other is not d


def test_the_entry_point_is_registered() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("topology") == "topology.testing.plugin"


def test_the_plugin_imports_neither_hypothesis_nor_pyspark() -> None:
    code = ("import sys, topology.testing.plugin; "
            "print(sorted(m for m in ('hypothesis', 'pyspark') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- a user's test file, run by pytest in a subprocess: no conftest, only the entry point ----

USER_TESTS = '''
from hypothesis import HealthCheck, given, settings

from topology import StreamsBuilder, TestRecord
from topology.testing import strategies

made = []


def build():
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: v * 10).to("out")
    return b.build()


def test_uses_the_fixture(topology_driver):
    d = topology_driver(build())
    made.append(d)
    d.create_input_topic("in").pipe_input("k", 1, timestamp=7)
    assert d.create_output_topic("out").read_records_to_list() == [TestRecord("k", 10, 7)]
    topology_driver(build()).close()  # closed by the test: teardown closes it again, harmlessly


def test_fails_after_making_a_driver(topology_driver):
    made.append(topology_driver(build()))
    raise RuntimeError("boom")


def test_drivers_of_earlier_tests_are_closed():
    assert len(made) == 2 and all(d._closed for d in made)


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strategies.events(strategies.records(max_disorder=100)))
def test_fixture_and_strategy(topology_driver, items):
    d = topology_driver(build())
    topic = d.create_input_topic("in")
    strategies.pipe(topic, d, items)
    expected = [(k, v * 10, ts) for k, v, ts in (i for i in items if len(i) == 3)]
    assert d.create_output_topic("out").read_records_to_list() == [
        TestRecord(*r) for r in expected]


def test_record_lists_differ(topology_driver):
    d = topology_driver(build())
    d.create_input_topic("in").pipe_records([("a", 1, 0), ("b", 2, 5), ("c", 3, 9)])
    assert d.create_output_topic("out").read_records_to_list() == [
        TestRecord("a", 10, 0), TestRecord("b", 99, 5)]
'''


@pytest.fixture
def user_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("PYTEST_PLUGINS", raising=False)
    pytester.makepyfile(test_user=USER_TESTS)
    assert not list(pytester.path.glob("conftest.py"))
    return pytester


def test_a_users_test_file_gets_the_fixture_from_the_entry_point(
        user_env: pytest.Pytester) -> None:
    result = user_env.runpytest_subprocess("-vv", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines([
        "*test_fails_after_making_a_driver FAILED*",
        "*test_drivers_of_earlier_tests_are_closed PASSED*",
        "*test_fixture_and_strategy PASSED*",
        "*test_record_lists_differ FAILED*",
    ])
    # the failing == of two record lists shows the aligned diff
    result.stdout.fnmatch_lines([
        "*records differ: 2 expected, 3 actual, 2 differences, compared on key, value, "
        "timestamp*",
        "*exp*act*expected*actual",
        "*=   0   0  key='a', value=10, timestamp=0  key='a', value=10, timestamp=0",
        "*~   1   1  key='b', value=99, timestamp=5  key='b', value=20, timestamp=5   (value)",
        "*+   -   2 * key='c', value=30, timestamp=9",
    ])


def test_without_the_plugin_the_fixture_is_missing(user_env: pytest.Pytester) -> None:
    result = user_env.runpytest_subprocess("-p", "no:topology", "-p", "no:cacheprovider",
                                           "-k", "uses_the_fixture")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'topology_driver' not found*"])


# -- the diff ---------------------------------------------------------------------------------


def test_assert_records_passes_on_the_fields_both_sides_give() -> None:
    actual = [TestRecord("a", 1, 10), TestRecord("b", 2, 20, [("h", b"x")])]
    assert_records(actual, [("a", 1), ("b", 2)])
    assert_records(actual, [("a", 1, 10), ("b", 2, 20)])
    assert_records(actual, [TestRecord("a", 1, 10), ("b", 2, 20, [("h", b"x")])])
    assert_records([], [])
    assert_records((("a", 1.0),), [("a", 1)])  # equal values, different reprs


def test_assert_records_shows_an_aligned_diff() -> None:
    actual = [TestRecord("a", 1, 10), TestRecord("x", 0, 11), TestRecord("b", 2, 20),
              TestRecord("c", 3, 31)]
    expected = [("a", 1, 10), ("b", 2, 20), ("c", 3, 30), ("d", 4, 40)]
    with pytest.raises(AssertionError) as info:
        assert_records(actual, expected)
    assert str(info.value).splitlines() == [
        "records differ: 4 expected, 4 actual, 3 differences, compared on key, value, "
        "timestamp (= equal, ~ changed, - missing, + extra)",
        "  exp act  expected                        actual",
        "=   0   0  key='a', value=1, timestamp=10  key='a', value=1, timestamp=10",
        "+   -   1                                  key='x', value=0, timestamp=11",
        "=   1   2  key='b', value=2, timestamp=20  key='b', value=2, timestamp=20",
        "~   2   3  key='c', value=3, timestamp=30  key='c', value=3, timestamp=31   (timestamp)",
        "-   3   -  key='d', value=4, timestamp=40  <missing>",
    ]


def test_long_runs_of_equal_records_are_elided_and_headers_shown_when_present() -> None:
    actual = [TestRecord("k", i, i) for i in range(20)]
    expected = [TestRecord("k", i, i) for i in range(20)]
    expected[10] = TestRecord("k", 10, 10, [("h", b"1")])
    lines = diff_records(actual, expected)
    assert lines is not None
    assert "compared on key, value, timestamp, headers" in lines[0]
    assert lines[2] == "  ... 8 equal records ..."
    assert lines[-1] == "  ... 7 equal records ..."
    changed = [line for line in lines if line.startswith("~")]
    assert len(changed) == 1 and changed[0].endswith("(headers)")
    assert "headers=(('h', b'1'),)" in changed[0]
    assert diff_records(actual, actual) is None


def test_diff_refuses_what_is_not_a_record() -> None:
    with pytest.raises(TypeError, match="a record is a TestRecord"):
        diff_records(["a"], [])


def test_assertrepr_hook_explains_record_lists_only() -> None:
    left = [TestRecord("a", 1, 0)]
    lines = pytest_assertrepr_compare(None, "==", left, [("a", 2, 0)])  # type: ignore[arg-type]
    assert lines == diff_records(left, [("a", 2, 0)])
    # tuples on one side: == is False though the data match; say so
    lines = pytest_assertrepr_compare(None, "==", left, [("a", 1, 0)])  # type: ignore[arg-type]
    assert lines is not None and "assert_records" in " ".join(lines)
    for op, a, b in [("!=", left, []), ("==", [("a", 1)], [("a", 2)]), ("==", left, "x"),
                     ("==", left, [1, 2]), ("==", 1, 2)]:
        assert pytest_assertrepr_compare(None, op, a, b) is None  # type: ignore[arg-type]

