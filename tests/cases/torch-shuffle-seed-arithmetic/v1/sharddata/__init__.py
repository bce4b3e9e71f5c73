"""sharddata: per-rank shards of in-memory datasets and their mini-batch loaders."""

from .loader import ShardLoader, make_loader

__version__ = "0.2.3"
__all__ = ["ShardLoader", "make_loader"]
