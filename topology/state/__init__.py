"""State stores: the public store values and backends.

Backends live in ``topology.state.memory`` (and, with the durable-state issue,
``topology.state.rocksdb``); this module re-exports only what users name.
"""

from .api import VersionedRecord as VersionedRecord

__all__ = ("VersionedRecord",)
