"""Pre-norm residual MLP blocks with dropout, and the tower that stacks them.

With ``recompute`` on, each block runs under activation checkpointing: its activations are
dropped after the forward and rebuilt by running the block again during backward, which
keeps the memory of a deep tower flat at the cost of one more forward per block.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, width: int, p: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.drop = nn.Dropout(p)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.drop(self.down(F.gelu(self.up(self.norm(h)))))


def checkpointed(block: nn.Module, h: torch.Tensor) -> torch.Tensor:
    return checkpoint(block, h, use_reentrant=False, preserve_rng_state=False)


class Tower(nn.Module):
    def __init__(self, width: int, depth: int, p: float = 0.1, recompute: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, p) for _ in range(depth))
        self.recompute = recompute

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            if self.recompute and self.training:
                h = h + checkpointed(block, h)
            else:
                h = h + block(h)
        return h
