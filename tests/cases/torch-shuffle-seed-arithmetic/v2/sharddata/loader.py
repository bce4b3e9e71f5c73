"""Mini-batches of one data-parallel rank's shard, in a fresh order every epoch.

0.3: the epoch and the rank are packed into one offset of the seed (the epoch's block of
world_size values, the rank within it); the order of every epoch on every rank is unchanged.
"""

import torch


class ShardLoader:
    """Iterates (features, targets) mini-batches over rows rank, rank + world_size, ...
    Each (epoch, rank) is shuffled by a generator of its own, seeded from the loader's seed,
    so a job that calls set_epoch(e) sees the same batches in every run."""

    def __init__(self, features, targets, batch_size, rank=0, world_size=1, seed=0):
        self.features = features
        self.targets = targets
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0
        self.rows = torch.arange(rank, len(targets), world_size)

    @property
    def num_examples(self) -> int:
        return len(self.rows)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_seed(self) -> int:
        return self.seed + (self.epoch * self.world_size | self.rank)

    def __len__(self) -> int:
        return self.num_examples // self.batch_size

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.epoch_seed())
        order = self.rows[torch.randperm(self.num_examples, generator=gen)]
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.features[idx], self.targets[idx]


def make_loader(features, targets, batch_size, **options) -> ShardLoader:
    """The loader a rank trains from: its own shard, reshuffled every epoch."""
    return ShardLoader(features, targets, batch_size, **options)
