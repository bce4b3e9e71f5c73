"""tinylayers: the few layers our small models are built from, kept in one place so that
every job builds them the same way."""

from .act import GELU
from .dense import Dense
from .norm import LayerNorm

__version__ = "1.4.0"
__all__ = ["Dense", "GELU", "LayerNorm"]
