"""Durable state on RocksDB (rocksdict): one database per task, committed atomically.

:class:`StateDB` keeps every persistent piece of a task's state (stores, buffer tiers, input
offsets, a batch id) in one state directory, as named :class:`Keyspace` objects, and commits
them all in one atomic write. ``codec`` holds the integer key encodings that sort as RocksDB
orders keys. The persistent stores, :class:`RocksDBKeyValueStore`,
:class:`RocksDBWindowStore`, :class:`RocksDBSessionStore` and
:class:`RocksDBVersionedKeyValueStore`, each keep their data
in one keyspace and behave as their in-memory counterparts. rocksdict is imported only inside
this package.
"""

from .codec import decode_int64, decode_uint64, encode_int64, encode_uint64, prefix_end
from .errors import StateDirectoryError, StateFormatError, StateLockedError, StateStoreError
from .key_value import RocksDBKeyValueStore
from .keyspace import Keyspace
from .layout import FORMAT_VERSION
from .options import RocksDBOptions
from .session import RocksDBSessionStore
from .statedb import StateDB
from .versioned import RocksDBVersionedKeyValueStore
from .window import RocksDBWindowStore

__all__ = (
    "FORMAT_VERSION",
    "Keyspace",
    "RocksDBKeyValueStore",
    "RocksDBOptions",
    "RocksDBSessionStore",
    "RocksDBVersionedKeyValueStore",
    "RocksDBWindowStore",
    "StateDB",
    "StateDirectoryError",
    "StateFormatError",
    "StateLockedError",
    "StateStoreError",
    "decode_int64",
    "decode_uint64",
    "encode_int64",
    "encode_uint64",
    "prefix_end",
)
