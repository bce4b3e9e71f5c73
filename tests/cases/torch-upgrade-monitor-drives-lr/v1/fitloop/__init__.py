"""fitloop: the small training loop our jobs share."""

from .loop import StepResult, Trainer
from .meters import SmoothedLoss

__version__ = "0.8.2"
__all__ = ["SmoothedLoss", "StepResult", "Trainer"]
