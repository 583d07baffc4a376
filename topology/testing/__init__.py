"""Public test API: the driver, its topics and records, the mock clock, and record diffs.

Also here, imported on their own: :mod:`topology.testing.plugin` (the pytest plugin, with the
``topology_driver`` fixture) and :mod:`topology.testing.strategies` (hypothesis strategies;
the ``testing`` extra).
"""

from .assertions import assert_records as assert_records
from .clock import MockClock as MockClock
from .driver import TopologyTestDriver as TopologyTestDriver
from .topics import TestInputTopic as TestInputTopic
from .topics import TestOutputTopic as TestOutputTopic
from .topics import TestRecord as TestRecord

__all__ = ("MockClock", "TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver",
           "assert_records")
