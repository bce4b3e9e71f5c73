"""The building blocks of the classifier."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """x + fc2(gelu(fc1(norm(x)))): a pre-norm residual feed-forward block."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.norm(x))
        return x + self.fc2(F.gelu(h))
