"""shardset: a data-parallel rank's part of an in-memory classification table."""

from .shards import RankShard, inverse_frequency, make_shard

__version__ = "0.3.2"
__all__ = ["RankShard", "inverse_frequency", "make_shard"]
