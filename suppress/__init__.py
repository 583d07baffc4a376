"""The suppression engine: hold back table updates and emit final or rate-limited results.

Layering: this package depends only on the standard library and ``sortedcontainers``; it
never imports ``topology``. ``topology`` adapts its records to
:class:`~suppress.processor.SuppressProcessor`, and gives a spilling buffer its on-disk store
and codec (:class:`~suppress.spill.SpillBackend`).

Public names: :class:`Suppressed`, :class:`BufferConfig` (with the strict/eager kinds and
:class:`BufferFullStrategy`) and :class:`BufferFullError`.
"""

from .config import BufferConfig as BufferConfig
from .config import BufferFullStrategy as BufferFullStrategy
from .config import EagerBufferConfig as EagerBufferConfig
from .config import StrictBufferConfig as StrictBufferConfig
from .config import Suppressed as Suppressed
from .errors import BufferFullError as BufferFullError
from .errors import InvalidSuppressionError as InvalidSuppressionError

__all__ = (
    "BufferConfig",
    "BufferFullError",
    "BufferFullStrategy",
    "EagerBufferConfig",
    "InvalidSuppressionError",
    "StrictBufferConfig",
    "Suppressed",
)
