"""A tiny character language model: an embedding table, learned positions, a causal
window mixer, two pre-norm MLP blocks and an output head that shares the embedding's
weight (weight tying: ``head.weight`` is ``embed.weight``, one Parameter)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab: int, width: int = 32, context: int = 4, length: int = 32) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab, width)
        nn.init.normal_(self.embed.weight, std=0.05)
        self.pos = nn.Parameter(0.02 * torch.randn(length, width))
        self.mix = nn.Linear(context * width, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(),
                          nn.Linear(2 * width, width))
            for _ in range(2)
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        e = self.embed(ids) + self.pos[:t]                     # (B, T, W)
        e = F.pad(e, (0, 0, self.context - 1, 0))              # causal window of `context`
        h = self.mix(torch.cat([e[:, i : i + t] for i in range(self.context)], -1))
        for block in self.blocks:
            h = h + block(h)
        return self.head(self.norm(h))
