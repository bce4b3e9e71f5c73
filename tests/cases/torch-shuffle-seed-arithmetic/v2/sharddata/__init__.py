"""sharddata: per-rank shards of in-memory datasets and their mini-batch loaders
(make_loader(x, y, batch_size=..., rank=..., world_size=..., seed=...), then set_epoch(e))."""

from .loader import ShardLoader, make_loader

__version__ = "0.3.0"
__all__ = ["ShardLoader", "make_loader"]
