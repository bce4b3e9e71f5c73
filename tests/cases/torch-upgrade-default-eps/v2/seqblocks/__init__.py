"""seqblocks: the configs and layers our small sequence models are built from.

    from seqblocks import ModelConfig, SeqClassifier
    net = SeqClassifier(ModelConfig(vocab=..., seq_len=..., classes=...))
"""

from .config import ModelConfig, NormConfig
from .model import SeqClassifier

__version__ = "2.2.0"
__all__ = ["ModelConfig", "NormConfig", "SeqClassifier"]
