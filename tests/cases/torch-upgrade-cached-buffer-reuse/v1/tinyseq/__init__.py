"""tinyseq: small building blocks for the team's sequence models."""

from .attention import SelfAttention, causal_mask
from .positions import sinusoidal_table

__version__ = "1.2.0"
__all__ = ["SelfAttention", "causal_mask", "sinusoidal_table"]
