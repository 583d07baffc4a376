"""In-memory store backends."""

from .key_value import InMemoryKeyValueStore as InMemoryKeyValueStore
from .window import InMemoryWindowStore as InMemoryWindowStore

__all__ = ("InMemoryKeyValueStore", "InMemoryWindowStore")
