"""Dense (fully connected) layers."""

import math

import torch
import torch.nn as nn


class Dense(nn.Module):
    """y = x W^T + b, W drawn from N(0, gain^2 / fan_in), b zero."""

    def __init__(self, fan_in: int, fan_out: int, gain: float = 1.0, bias: bool = True) -> None:
        super().__init__()
        std = gain / math.sqrt(fan_in)
        self.weight = nn.Parameter(torch.randn(fan_out, fan_in) * std)
        self.bias = nn.Parameter(torch.zeros(fan_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.weight.t()
        if self.bias is not None:
            y = y + self.bias
        return y
