"""In-memory store backends."""

from .key_value import InMemoryKeyValueStore as InMemoryKeyValueStore
from .session import InMemorySessionStore as InMemorySessionStore
from .versioned import InMemoryVersionedKeyValueStore as InMemoryVersionedKeyValueStore
from .window import InMemoryWindowStore as InMemoryWindowStore

__all__ = ("InMemoryKeyValueStore", "InMemorySessionStore", "InMemoryVersionedKeyValueStore",
           "InMemoryWindowStore")
