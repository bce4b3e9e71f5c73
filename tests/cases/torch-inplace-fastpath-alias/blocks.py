"""Pre-activation residual MLP blocks, and the tower that stacks them.

Each block activates its input, runs it through two linear layers, and adds the result to
the block's input (the shortcut). With ``inplace`` on, the activations overwrite the
tensor they read instead of allocating a new one, which halves the activation memory of a
wide tower; LeakyReLU's backward reads its output, so the gradient needs no extra copy.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

SLOPE = 0.1


class PreActBlock(nn.Module):
    def __init__(self, width: int, hidden: int, inplace: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.inplace = inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        h = self.fc1(F.leaky_relu(x, SLOPE, inplace=self.inplace))
        h = self.fc2(F.leaky_relu(h, SLOPE, inplace=self.inplace))
        return shortcut + h


class Tower(nn.Module):
    def __init__(self, width: int, hidden: int, depth: int, inplace: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(PreActBlock(width, hidden, inplace) for _ in range(depth))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            h = block(h)
        return h
