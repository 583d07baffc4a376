"""In-memory store backends."""

from .key_value import InMemoryKeyValueStore as InMemoryKeyValueStore
from .versioned import InMemoryVersionedKeyValueStore as InMemoryVersionedKeyValueStore
from .window import InMemoryWindowStore as InMemoryWindowStore

__all__ = ("InMemoryKeyValueStore", "InMemoryVersionedKeyValueStore", "InMemoryWindowStore")
