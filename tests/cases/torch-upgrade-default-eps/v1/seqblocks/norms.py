"""Normalisation layers and the factory the model builds them with."""

import torch
import torch.nn as nn

from .config import NormConfig


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, over the last dimension."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = (x * x).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * self.weight


def build_norm(cfg: NormConfig, dim: int) -> nn.Module:
    if cfg.kind == "rms":
        return RMSNorm(dim, eps=cfg.eps)
    if cfg.kind == "layer":
        return nn.LayerNorm(dim, eps=cfg.eps)
    raise ValueError(f"unknown norm kind {cfg.kind!r}")
