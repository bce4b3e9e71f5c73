"""tinyseq: small building blocks for the team's sequence models.

    from tinyseq import SelfAttention, sinusoidal_table

1.3: the causal mask and the sinusoidal table are built once per shape and reused
(clear_caches() frees them).
"""

from .attention import SelfAttention, causal_mask
from .positions import sinusoidal_table


def clear_caches() -> None:
    """Forget every cached mask and positional table."""
    from . import attention, positions

    attention._MASKS.clear()
    positions._TABLES.clear()


__version__ = "1.3.0"
__all__ = ["SelfAttention", "causal_mask", "clear_caches", "sinusoidal_table"]
