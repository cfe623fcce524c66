"""The memory model: a frozen decoder whose KV cache is compressed window by window."""

from .cache import MemoryCache
from .checkpoint import MemoryWeightsError
from .config import MemoryConfig
from .families import UnsupportedModelError
from .model import ContextTooLongError, MemoryModel, MemoryModelOutput
from .state import Memory, MemoryFileError, MemoryMismatchError

__all__ = [
    "ContextTooLongError",
    "Memory",
    "MemoryCache",
    "MemoryConfig",
    "MemoryFileError",
    "MemoryMismatchError",
    "MemoryModel",
    "MemoryModelOutput",
    "MemoryWeightsError",
    "UnsupportedModelError",
]
