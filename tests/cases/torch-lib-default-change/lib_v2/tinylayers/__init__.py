"""tinylayers: the few layers our small models are built from, kept in one place so that
every job builds them the same way.

    from tinylayers import Dense, GELU, LayerNorm
"""

from .act import GELU
from .dense import Dense, parameter_count
from .norm import LayerNorm

__version__ = "1.5.0"
__all__ = ["Dense", "GELU", "LayerNorm", "parameter_count"]
