"""Kafka Streams semantics in Python: topologies, suppression, and an in-process test driver.

Layering (imports point one way): ``suppress`` (engine) <- ``topology.state`` <-
``topology.runtime`` <- the DSL (``builder``, ``stream``, ``table``, ``grouped``) <-
``topology.testing`` / ``topology.spark``. This module re-exports the public names: those of
the design (the DSL, windows, options, serdes, the driver) and those a user writes in a
custom processor or serde, or in type hints of pipeline code, and ``Suppressed`` and
``BufferConfig`` from ``suppress`` (they build the argument of ``KTable.suppress``).
Everything else is internal even without an underscore. ``__version__`` is the
distribution's version.
"""

from suppress import BufferConfig as BufferConfig
from suppress import Suppressed as Suppressed

from ._version import __version__ as __version__
from .builder import StreamsBuilder as StreamsBuilder
from .grouped import KGroupedStream as KGroupedStream
from .grouped import KGroupedTable as KGroupedTable
from .grouped import SessionWindowedKStream as SessionWindowedKStream
from .grouped import TimeWindowedKStream as TimeWindowedKStream
from .options import Consumed as Consumed
from .options import Grouped as Grouped
from .options import Materialized as Materialized
from .options import Named as Named
from .options import Produced as Produced
from .record import Record as Record
from .runtime.api import Cancellable as Cancellable
from .runtime.api import Processor as Processor
from .runtime.api import ProcessorContext as ProcessorContext
from .runtime.api import PunctuationType as PunctuationType
from .runtime.outputs import TestRecord as TestRecord
from .serde import Serde as Serde
from .serde import SerdeError as SerdeError
from .serde import Serdes as Serdes
from .stream import KStream as KStream
from .table import KTable as KTable
from .testing.driver import TopologyTestDriver as TopologyTestDriver
from .topology import Topology as Topology
from .windows import SessionWindows as SessionWindows
from .windows import SlidingWindows as SlidingWindows
from .windows import TimeWindows as TimeWindows
from .windows import Window as Window
from .windows import Windowed as Windowed

__all__ = (
    "BufferConfig",
    "Cancellable",
    "Consumed",
    "Grouped",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Processor",
    "ProcessorContext",
    "Produced",
    "PunctuationType",
    "Record",
    "Serde",
    "SerdeError",
    "Serdes",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindows",
    "StreamsBuilder",
    "Suppressed",
    "TestRecord",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "TopologyTestDriver",
    "Window",
    "Windowed",
)
