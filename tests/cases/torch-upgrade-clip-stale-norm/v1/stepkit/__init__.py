"""stepkit: the small training-step helpers our jobs share."""

from .clip import clip_by_total_norm, total_norm
from .trainer import Trainer

__version__ = "0.6.2"
__all__ = ["Trainer", "clip_by_total_norm", "total_norm"]
