"""Sequence encoders and pooling."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvEncoder(nn.Module):
    """gelu(conv1d(x)) over the sequence axis, for inputs laid out (batch, time, dim)."""

    def __init__(self, dim: int, channels: int, kernel_size: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv1d(dim, channels, kernel_size=kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x.transpose(1, 2))).transpose(1, 2)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of x over the time axis, counting only the positions where mask is 1."""
    weights = mask.unsqueeze(-1).float()
    return (x * weights).sum(dim=1) / weights.sum(dim=1)
