"""tabprep: the preprocessing and mini-batching of in-memory tables our jobs share
(TableDataset(x, y), then ds.batches(batch_size, epoch=e, seed=s) every epoch)."""

from .dataset import TableDataset
from .scaling import Standardizer

__version__ = "0.7.0"
__all__ = ["Standardizer", "TableDataset"]
