"""The ``pool`` fixture: a StateDB per property test, emptied between examples (pool.py)."""

from .pool import pool  # noqa: F401 - a fixture, registered by being here
