"""trainkit: the training step our self-distillation jobs share."""

from .loop import ModelEMA, Trainer

__version__ = "1.5.0"
__all__ = ["ModelEMA", "Trainer"]
