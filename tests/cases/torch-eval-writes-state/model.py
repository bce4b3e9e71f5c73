"""A tabular classifier whose first layer standardises its inputs with running statistics.

The features of the table arrive on very different scales, so the model keeps a running
mean and variance of every feature (RunningNorm) and standardises with them. The statistics
are gathered while the model trains (every training batch is folded in before it is
standardised) and frozen in eval mode, as BatchNorm's are, but unlike BatchNorm the
training forward also standardises with the running values, not the batch's own.
"""

import torch
import torch.nn as nn


class RunningNorm(nn.Module):
    def __init__(self, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros(features))
        self.register_buffer("var", torch.ones(features))
        self.register_buffer("count", torch.zeros(()))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        # Chan et al.'s parallel update: merge the batch's moments into the running ones
        n = x.shape[0]
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta * delta * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.update(x)
        return (x - self.mean) / torch.sqrt(self.var + self.eps)


class TabularNet(nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.norm = RunningNorm(features)
        self.body = nn.Sequential(
            nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
        )
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.norm(x)))
