"""The job's model: a small residual MLP classifier built from tinylayers."""

import torch
import torch.nn as nn
from tinylayers import GELU, Dense, LayerNorm


class Block(nn.Module):
    """x + Dense(GELU(Dense(LayerNorm(x)))): a pre-norm residual feed-forward block."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.norm = LayerNorm(width)
        self.up = Dense(width, hidden)
        self.act = GELU()
        self.down = Dense(hidden, width, gain=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.act(self.up(self.norm(x))))


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, width: int = 48, depth: int = 2) -> None:
        super().__init__()
        self.embed = Dense(features, width)
        self.blocks = nn.ModuleList(Block(width, 2 * width) for _ in range(depth))
        self.norm = LayerNorm(width)
        self.head = Dense(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))
