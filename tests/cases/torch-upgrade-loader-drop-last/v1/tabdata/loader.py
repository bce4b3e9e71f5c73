"""Mini-batches over a pair of in-memory tensors, in a fresh order every epoch."""

import torch


class BatchLoader:
    """Iterates (features, targets) mini-batches. The order of epoch e is a permutation
    drawn from a generator seeded with seed + e, so a job that calls set_epoch(e) sees the
    same batches in every run."""

    def __init__(
        self,
        features: torch.Tensor,
        targets: torch.Tensor,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
    ):
        self.features = features
        self.targets = targets
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        n = len(self.targets)
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size

    def _order(self) -> torch.Tensor:
        n = len(self.targets)
        if not self.shuffle:
            return torch.arange(n)
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(n, generator=g)

    def __iter__(self):
        order = self._order()
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.features[idx], self.targets[idx]


def make_loader(features, targets, batch_size, **options) -> BatchLoader:
    """The loader a job trains from: shuffled every epoch unless options say otherwise."""
    return BatchLoader(features, targets, batch_size, **options)
