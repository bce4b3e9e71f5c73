"""shardset: a data-parallel rank's part of an in-memory classification table
(make_shard(x, y, num_classes, batch_size, rank=..., world_size=..., seed=...))."""

from .shards import RankShard, inverse_frequency, make_shard

__version__ = "0.4.0"
__all__ = ["RankShard", "inverse_frequency", "make_shard"]
