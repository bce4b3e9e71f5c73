"""A table of features and targets, standardised, in shuffled mini-batches."""

import torch

from .scaling import Standardizer


class TableDataset:
    """Rows of (features, targets). The order of epoch e is a permutation drawn from a
    generator seeded with seed + e; the features are standardised as they are batched."""

    def __init__(self, features: torch.Tensor, targets: torch.Tensor, standardise=True):
        self.features = features
        self.targets = targets
        self.scaler = Standardizer().fit(features) if standardise else None

    @property
    def num_rows(self) -> int:
        return len(self.targets)

    def __len__(self) -> int:
        return self.num_rows

    def batches(self, batch_size: int, epoch: int = 0, seed: int = 0):
        gen = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(self.num_rows, generator=gen)
        for start in range(0, self.num_rows - batch_size + 1, batch_size):
            idx = order[start : start + batch_size]
            x = self.features[idx]
            if self.scaler is not None:
                x = self.scaler.transform(x)
            yield x, self.targets[idx]
