"""Multi-head self-attention with an optional causal mask."""

import torch
import torch.nn as nn


def causal_mask(length: int, device: torch.device | None = None) -> torch.Tensor:
    """A (length, length) boolean mask, True where a query may attend to a key."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


class SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, causal: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        if self.causal:
            scores = scores.masked_fill(~causal_mask(t, x.device), float("-inf"))
        y = scores.softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, c))
