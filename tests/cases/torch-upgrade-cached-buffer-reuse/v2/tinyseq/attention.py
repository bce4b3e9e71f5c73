"""Multi-head self-attention with an optional causal mask."""

import torch
import torch.nn as nn

_MASKS: dict[tuple[int, torch.device | None], torch.Tensor] = {}


def causal_mask(length: int, device: torch.device | None = None) -> torch.Tensor:
    """A (length, length) boolean mask, True where a query may attend to a key (cached per
    length and device)."""
    key = (length, device)
    if key not in _MASKS:
        _MASKS[key] = torch.ones(length, length, dtype=torch.bool, device=device).tril()
    return _MASKS[key]


class SelfAttention(nn.Module):
    """Scaled dot-product self-attention over ``heads`` heads of width // heads."""

    def __init__(self, width: int, heads: int, causal: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        head_dim = c // self.heads
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * head_dim**-0.5
        if self.causal:
            scores = scores.masked_fill(~causal_mask(t, x.device), float("-inf"))
        y = scores.softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, c))
