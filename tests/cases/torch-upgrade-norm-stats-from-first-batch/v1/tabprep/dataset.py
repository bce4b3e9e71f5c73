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

    def __len__(self) -> int:
        return len(self.targets)

    def batches(self, batch_size: int, epoch: int = 0, seed: int = 0):
        g = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(len(self), generator=g)
        for i in range(len(self) // batch_size):
            idx = order[i * batch_size : (i + 1) * batch_size]
            x = self.features[idx]
            if self.scaler is not None:
                x = self.scaler.transform(x)
            yield x, self.targets[idx]
