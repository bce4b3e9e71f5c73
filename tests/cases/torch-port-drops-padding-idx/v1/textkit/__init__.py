"""textkit: the small convolutional text classifier our intent-tagging jobs train."""

from .model import PAD, ConvClassifier

__all__ = ["PAD", "ConvClassifier"]
__version__ = "1.4.2"
