"""tabprep: the preprocessing and mini-batching of in-memory tables our jobs share."""

from .dataset import TableDataset
from .scaling import Standardizer

__version__ = "0.6.2"
__all__ = ["Standardizer", "TableDataset"]
