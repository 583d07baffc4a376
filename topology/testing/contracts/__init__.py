"""Contract checkers: the semantic checks any store backend must pass.

``check_versioned_store(factory)`` runs the versioned key-value store contract against stores
made by ``factory`` (see its docstring); the project's own backends are tested with it, and a
custom backend can be too.
"""

from .versioned import VersionedStoreFactory as VersionedStoreFactory
from .versioned import check_versioned_store as check_versioned_store

__all__ = ("VersionedStoreFactory", "check_versioned_store")
