"""textkit: the small convolutional text classifier our intent-tagging jobs train.

2.0 splits the package into layers (``textkit.nn``) and models (``textkit.models``).
``ConvClassifier`` stays importable from the top level for 1.x jobs.
"""

from .models.classifier import TextClassifier
from .vocab import PAD

ConvClassifier = TextClassifier

__all__ = ["PAD", "ConvClassifier", "TextClassifier"]
__version__ = "2.0.0"
