"""Input embeddings: a learned vector per token id plus one per position."""

import torch
import torch.nn as nn


class TokenEmbedding(nn.Module):
    def __init__(self, vocab: int, context: int, dim: int, std: float = 0.02) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        nn.init.normal_(self.tokens.weight, std=std)
        self.positions = nn.Embedding(context, dim)
        nn.init.normal_(self.positions.weight, std=std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.tokens(ids) + self.positions(torch.arange(ids.size(1)))
