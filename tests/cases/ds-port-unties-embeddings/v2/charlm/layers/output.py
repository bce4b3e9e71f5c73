"""The output projection: a score for every vocabulary entry from the final hidden state."""

import torch
import torch.nn as nn


class OutputProjection(nn.Module):
    """A bias-free projection to the vocabulary whose rows are the token embedding's vectors."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        vocab, dim = embedding.weight.shape
        self.proj = nn.Linear(dim, vocab, bias=False)
        with torch.no_grad():
            self.proj.weight.copy_(embedding.weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.proj(h)
