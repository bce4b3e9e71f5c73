"""fitloop: the small training loop our jobs share (Trainer(...).train_step per batch)."""

from .loop import StepResult, Trainer
from .meters import SmoothedLoss

__version__ = "0.9.0"
__all__ = ["SmoothedLoss", "StepResult", "Trainer"]
