"""One data-parallel rank's contiguous block of rows, as shuffled mini-batches."""

import torch


def inverse_frequency(targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Loss weights n / (C * count_c), so that every class weighs alike."""
    counts = torch.bincount(targets, minlength=num_classes).clamp(min=1)
    return len(targets) / (num_classes * counts.to(torch.float32))


class RankShard:
    """Rows [rank * n // W, (rank + 1) * n // W) of a table. class_weights are the inverse
    class frequencies of the table, for a weighted loss; epoch e is shuffled by a generator
    seeded with seed + e."""

    def __init__(self, features, targets, num_classes, batch_size, rank=0, world_size=1, seed=0):
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0
        self.class_weights = inverse_frequency(targets, num_classes)
        per_rank = len(targets) // world_size
        start = rank * per_rank
        self.features = features[start : start + per_rank]
        self.targets = targets[start : start + per_rank]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.targets) // self.batch_size

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.targets), generator=g)
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.features[idx], self.targets[idx]


def make_shard(features, targets, num_classes, batch_size, **options) -> RankShard:
    """The shard a rank trains from (options: rank, world_size, seed)."""
    return RankShard(features, targets, num_classes, batch_size, **options)
