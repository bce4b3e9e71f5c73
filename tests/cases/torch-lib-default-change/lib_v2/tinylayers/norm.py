"""Normalisation layers.

LayerNorm normalises each row over its last dimension to zero mean and unit variance
(the biased variance, as torch.nn.LayerNorm), then applies a learned scale and shift.
"""

import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    """Layer normalisation over the last dimension, with a learned scale and shift."""

    def __init__(self, dim: int, eps: float = 1e-6, affine: bool = True) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim)) if affine else None
        self.bias = nn.Parameter(torch.zeros(dim)) if affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mu = x.mean(dim=-1, keepdim=True)
        centred = x - mu
        var = (centred * centred).mean(dim=-1, keepdim=True)
        y = centred * torch.rsqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight + self.bias
        return y

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"
