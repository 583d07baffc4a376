"""Kafka Streams semantics in Python: topologies, suppression, and an in-process test driver.

Layering (imports point one way): ``suppress`` (engine) <- ``topology.state`` <-
``topology.runtime`` <- the DSL (``builder``, ``stream``, ``table``, ``grouped``) <-
``topology.testing`` / ``topology.spark``. This module re-exports exactly the public names of
DESIGN.md; everything else is internal even without an underscore.
"""

from .builder import StreamsBuilder as StreamsBuilder
from .options import Consumed as Consumed
from .options import Grouped as Grouped
from .options import Materialized as Materialized
from .options import Produced as Produced
from .serde import Serdes as Serdes
from .testing.driver import TopologyTestDriver as TopologyTestDriver
from .testing.topics import TestRecord as TestRecord
from .topology import Topology as Topology
from .windows import SessionWindows as SessionWindows
from .windows import SlidingWindows as SlidingWindows
from .windows import TimeWindows as TimeWindows
from .windows import Window as Window
from .windows import Windowed as Windowed

__all__ = (
    "Consumed",
    "Grouped",
    "Materialized",
    "Produced",
    "Serdes",
    "SessionWindows",
    "SlidingWindows",
    "StreamsBuilder",
    "TestRecord",
    "TimeWindows",
    "Topology",
    "TopologyTestDriver",
    "Window",
    "Windowed",
)
