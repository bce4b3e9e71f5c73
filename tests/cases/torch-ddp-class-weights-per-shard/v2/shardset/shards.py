"""One data-parallel rank's contiguous block of rows, as shuffled mini-batches.

0.4: the set-up is one method that a subclass can extend; the rows of each rank and the
order of its batches are unchanged.
"""

import torch


def inverse_frequency(targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Loss weights n / (C * count_c), so that every class weighs alike."""
    counts = torch.bincount(targets, minlength=num_classes).clamp(min=1)
    return len(targets) / (num_classes * counts.to(torch.float32))


class RankShard:
    """A rank's block of rows of a table and the inverse class frequencies its weighted loss
    uses (class_weights); epoch e is shuffled by a generator seeded with seed + e."""

    def __init__(self, features, targets, num_classes, batch_size, rank=0, world_size=1, seed=0):
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0
        self._prepare(features, targets)

    def _prepare(self, features: torch.Tensor, targets: torch.Tensor) -> None:
        start, stop = self.bounds(len(targets))
        self.features = features[start:stop]
        self.targets = targets[start:stop]
        self.class_weights = inverse_frequency(self.targets, self.num_classes)

    def bounds(self, num_rows: int) -> tuple[int, int]:
        per_rank = num_rows // self.world_size
        return self.rank * per_rank, (self.rank + 1) * per_rank

    @property
    def num_examples(self) -> int:
        return len(self.targets)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_examples // self.batch_size

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.num_examples, generator=gen)
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.features[idx], self.targets[idx]


def make_shard(features, targets, num_classes, batch_size, **options) -> RankShard:
    """The shard a rank trains from (options: rank, world_size, seed)."""
    return RankShard(features, targets, num_classes, batch_size, **options)
