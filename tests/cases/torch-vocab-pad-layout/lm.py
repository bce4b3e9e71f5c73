"""A tiny character language model: a tied embedding table, learned positions, two
pre-norm MLP blocks over a causal window of the previous tokens, and the tied output head.
The table has ``padded`` rows (layout.py); ids below ``vocab`` are the characters.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab: int, padded: int, width: int = 32, context: int = 4) -> None:
        super().__init__()
        self.vocab, self.padded, self.context = vocab, padded, context
        self.table = nn.Parameter(torch.zeros(padded, width))
        nn.init.normal_(self.table[:vocab], std=0.02)  # padding rows start at zero
        self.mix = nn.Linear(context * width, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(),
                          nn.Linear(2 * width, width))
            for _ in range(2)
        )
        self.norm = nn.LayerNorm(width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        e = F.embedding(ids, self.table)                       # (B, T, W)
        e = F.pad(e, (0, 0, self.context - 1, 0))              # causal window of `context`
        h = self.mix(torch.cat([e[:, i : i + ids.shape[1]] for i in range(self.context)], -1))
        for block in self.blocks:
            h = h + block(h)
        return self.logits(self.norm(h))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.table)
