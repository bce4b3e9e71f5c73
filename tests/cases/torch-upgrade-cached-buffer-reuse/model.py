"""The job's model: a one-block causal transformer that classifies a token sequence from
its last position. Attention and the positional table come from tinyseq."""

import torch
import torch.nn as nn
from tinyseq import SelfAttention, sinusoidal_table

# the fixed positions are kept small beside the learned token embeddings
POS_SCALE = 0.1


class TinyEncoder(nn.Module):
    def __init__(self, vocab: int, classes: int, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.width = width
        self.embed = nn.Embedding(vocab, width)
        self.norm1 = nn.LayerNorm(width)
        self.attn = SelfAttention(width, heads, causal=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = sinusoidal_table(tokens.size(1), self.width).mul_(POS_SCALE)
        x = self.embed(tokens) + pos
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(self.norm(x[:, -1]))
