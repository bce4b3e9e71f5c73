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
        hidden = self.fc1(self.norm(x))
        return x + self.fc2(F.gelu(hidden))


class LowRankAdapter(nn.Module):
    """x + up(down(x)) * scale, a low-rank correction of the input features for fine-tuning
    on a shifted feature distribution. ``up`` starts at zero, so a fresh adapter is the
    identity."""

    def __init__(self, dim: int, rank: int, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale
        self.down = nn.Linear(dim, rank, bias=False)
        self.up = nn.Linear(rank, dim, bias=False)
        nn.init.zeros_(self.up.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(self.down(x)) * self.scale
