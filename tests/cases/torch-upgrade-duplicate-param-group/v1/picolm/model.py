"""A small pre-norm residual MLP language model over a token window, its output head tied to
the token embedding."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """x + fc2(gelu(fc1(norm(x))))."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.norm(x))
        return x + self.fc2(F.gelu(h))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, context: int, width: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, width)
        self.pos_embed = nn.Parameter(torch.randn(context, width) * 0.02)
        self.blocks = nn.ModuleList(Block(width, 2 * width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok_embed.weight  # tied
        nn.init.normal_(self.tok_embed.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embed(tokens) + self.pos_embed[: tokens.size(1)]
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))
