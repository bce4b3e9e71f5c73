"""tabdata: the in-memory datasets and mini-batch loaders our tabular jobs share."""

from .loader import BatchLoader, make_loader

__version__ = "0.4.1"
__all__ = ["BatchLoader", "make_loader"]
