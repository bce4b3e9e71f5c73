"""seqblocks: the configs and layers our small sequence models are built from."""

from .config import ModelConfig, NormConfig
from .model import SeqClassifier

__version__ = "2.1.0"
__all__ = ["ModelConfig", "NormConfig", "SeqClassifier"]
