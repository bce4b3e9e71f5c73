"""The classifier: an input projection, pre-norm residual blocks, a final norm and a head.

2.4: an optional low-rank adapter on the input features, for fine-tuning on a shifted
feature distribution. It is off by default (``enable_adapter()`` turns it on) and always
built, so checkpoints have the same keys whether a job uses it or not.
"""

import torch
import torch.nn as nn

from .layers import Block, LowRankAdapter


class Classifier(nn.Module):
    def __init__(
        self, features: int, classes: int, width: int = 48, depth: int = 2, adapter_rank: int = 4
    ) -> None:
        super().__init__()
        # submodules in the order the forward applies them
        self.adapter = LowRankAdapter(features, adapter_rank)
        self.adapter_enabled = False
        self.embed = nn.Linear(features, width)
        self.blocks = nn.ModuleList(Block(width, 2 * width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def enable_adapter(self, enabled: bool = True) -> None:
        self.adapter_enabled = enabled

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.adapter_enabled:
            x = self.adapter(x)
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))
