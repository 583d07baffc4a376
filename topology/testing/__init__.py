"""Public test API: the driver, its topics and records, and the mock clock."""

from .clock import MockClock as MockClock
from .driver import TopologyTestDriver as TopologyTestDriver
from .topics import TestInputTopic as TestInputTopic
from .topics import TestOutputTopic as TestOutputTopic
from .topics import TestRecord as TestRecord

__all__ = ("MockClock", "TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver")
