"""The pytest plugin: the ``topology_driver`` fixture and readable diffs of record lists.

Installed with the package (entry point ``pytest11``, name ``topology``), so a test uses the
fixture without a ``conftest.py``::

    def test_upper(topology_driver):
        driver = topology_driver(build_topology())     # closed when the test ends
        driver.create_input_topic("in").pipe_input("k", "a", timestamp=0)
        assert driver.create_output_topic("out").read_key_value() == ("k", "A")

A failing ``assert records == expected`` of two record lists (``TestRecord`` objects, or
``(key, value[, timestamp])`` tuples next to them) shows the aligned diff of
:func:`topology.testing.assert_records`. Disable the plugin with ``-p no:topology``. It
imports neither hypothesis nor pyspark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import pytest

from ..topology import Topology
from .assertions import diff_records, is_record_list
from .driver import TopologyTestDriver
from .topics import TestRecord

__all__ = ("DriverFactory", "pytest_assertrepr_compare", "topology_driver")


class DriverFactory(Protocol):
    """The ``topology_driver`` fixture: makes drivers that are closed when the test ends.

    Takes the arguments of :class:`~topology.testing.TopologyTestDriver`; use it to
    annotate the fixture argument: ``def test_x(topology_driver: DriverFactory)``.
    """

    def __call__(self, topology: Topology, config: Mapping[str, Any] | None = None,
                 state_dir: str | os.PathLike[str] | None = None,
                 initial_wall_clock_ms: int | None = None) -> TopologyTestDriver:
        """A new driver for ``topology``, closed at the test's teardown."""
        ...


@pytest.fixture
def topology_driver() -> Iterator[DriverFactory]:
    """A factory of :class:`~topology.testing.TopologyTestDriver` objects.

    ``topology_driver(topology, config=None, state_dir=None, initial_wall_clock_ms=None)``
    returns a new driver; every driver it made is closed at teardown, whether the test passed
    or failed (closing one the test already closed does nothing). Function scope: each test
    gets its own.
    """
    drivers: list[TopologyTestDriver] = []

    def make(topology: Topology, config: Mapping[str, Any] | None = None,
             state_dir: str | os.PathLike[str] | None = None,
             initial_wall_clock_ms: int | None = None) -> TopologyTestDriver:
        driver = TopologyTestDriver(topology, config, state_dir, initial_wall_clock_ms)
        drivers.append(driver)
        return driver

    yield make
    errors: list[Exception] = []
    for driver in reversed(drivers):  # every one, even when an earlier close fails
        try:
            driver.close()
        except Exception as exc:  # raised below, once the others are closed
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup("closing topology_driver drivers failed", errors)


def _records_or_tuples(obj: object) -> bool:
    """A list or tuple whose items all are records or record tuples (an empty one too)."""
    return isinstance(obj, list | tuple) and all(
        isinstance(item, TestRecord) or (isinstance(item, tuple) and 2 <= len(item) <= 4)
        for item in obj)


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: object,
                              right: object) -> list[str] | None:
    """Explain a failing ``==`` of two record lists with the diff of ``assert_records``.

    Applies when both sides are lists or tuples of records and at least one holds a
    ``TestRecord``; ``left`` is shown as actual and ``right`` as expected (write
    ``assert actual == expected``).
    """
    if op != "==" or not (is_record_list(left) or is_record_list(right)):
        return None
    if not (_records_or_tuples(left) and _records_or_tuples(right)):
        return None
    assert isinstance(left, list | tuple) and isinstance(right, list | tuple)
    lines = diff_records(left, right)
    if lines is None:  # equal on the shared fields: == failed on types, not on data
        return ["record lists differ only in kind: a TestRecord never equals a tuple",
                "they match on the fields both give; compare them with "
                "topology.testing.assert_records(actual, expected), or read tuples "
                "(read_key_values_to_list)"]
    return lines
