"""A pre-norm decoder block: causal self-attention, then an MLP, each on a residual."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Single-head scaled dot-product attention where position t sees positions <= t."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    future = torch.ones(q.size(-2), q.size(-2), dtype=torch.bool).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, mlp_ratio: int = 2) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_ratio * dim)
        self.fc2 = nn.Linear(mlp_ratio * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.proj(causal_attention(*self.qkv(self.ln1(x)).chunk(3, dim=-1)))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
