"""Per-feature standardisation: (x - mean) / std, with the statistics of a table."""

import torch


class Standardizer:
    """Scales every column to zero mean and unit standard deviation."""

    def __init__(self, eps: float = 1e-6) -> None:
        self.eps = eps
        self.mean: torch.Tensor | None = None
        self.std: torch.Tensor | None = None

    def fit(self, features: torch.Tensor) -> "Standardizer":
        self.mean = features.mean(dim=0)
        self.std = features.std(dim=0).clamp_min(self.eps)
        return self

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std
