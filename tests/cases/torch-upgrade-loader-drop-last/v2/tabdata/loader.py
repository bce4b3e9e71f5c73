"""Mini-batches over a pair of in-memory tensors, in a fresh order every epoch.

0.5: the shorter last batch of an epoch is kept rather than thrown away, so every example
is seen once per epoch; the full batches and their order are unchanged.
"""

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
        drop_last: bool = False,
    ):
        self.features = features
        self.targets = targets
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0

    @property
    def num_examples(self) -> int:
        return len(self.targets)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        full, rest = divmod(self.num_examples, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def _order(self) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.num_examples)
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(self.num_examples, generator=gen)

    def __iter__(self):
        order = self._order()
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.features[idx], self.targets[idx]


def make_loader(features, targets, batch_size, **options) -> BatchLoader:
    """The loader a job trains from: shuffled every epoch unless options say otherwise."""
    return BatchLoader(features, targets, batch_size, **options)
