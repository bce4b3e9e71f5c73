"""Mini-batches of one data-parallel rank's shard, in a fresh order every epoch."""

import torch


class ShardLoader:
    """Iterates (features, targets) mini-batches over rows rank, rank + world_size, ...
    Epoch e on rank r is shuffled by a generator seeded with seed + e * world_size + r, a
    stream of its own for every (epoch, rank) and the same one in every run."""

    def __init__(self, features, targets, batch_size, rank=0, world_size=1, seed=0):
        self.features = features
        self.targets = targets
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0
        self.rows = torch.arange(rank, len(targets), world_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_seed(self) -> int:
        return self.seed + self.epoch * self.world_size + self.rank

    def __len__(self) -> int:
        return len(self.rows) // self.batch_size

    def __iter__(self):
        g = torch.Generator().manual_seed(self.epoch_seed())
        order = self.rows[torch.randperm(len(self.rows), generator=g)]
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.features[idx], self.targets[idx]


def make_loader(features, targets, batch_size, **options) -> ShardLoader:
    """The loader a rank trains from: its own shard, reshuffled every epoch."""
    return ShardLoader(features, targets, batch_size, **options)
