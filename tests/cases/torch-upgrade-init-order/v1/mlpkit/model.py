"""The classifier: an input projection, pre-norm residual blocks, a final norm and a head."""

import torch
import torch.nn as nn

from .layers import Block


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, width: int = 48, depth: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.blocks = nn.ModuleList(Block(width, 2 * width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))
