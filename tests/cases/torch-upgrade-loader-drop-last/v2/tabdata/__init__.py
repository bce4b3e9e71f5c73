"""tabdata: the in-memory datasets and mini-batch loaders our tabular jobs share
(make_loader(x, y, batch_size=..., seed=...), then set_epoch(e) before each epoch)."""

from .loader import BatchLoader, make_loader

__version__ = "0.5.0"
__all__ = ["BatchLoader", "make_loader"]
