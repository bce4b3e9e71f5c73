"""A small sequence classifier: token and position embeddings, one residual MLP block with
dropout, mean pooling over the visible tokens, and a linear head."""

import torch
import torch.nn as nn

WIDTH = 32


class Classifier(nn.Module):
    def __init__(self, vocab: int, max_len: int, classes: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, WIDTH)
        self.pos = nn.Embedding(max_len, WIDTH)
        self.block = nn.Sequential(
            nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(),
            nn.Dropout(0.1), nn.Linear(2 * WIDTH, WIDTH),
        )
        self.head = nn.Linear(WIDTH, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])
        h = self.tok(ids) + self.pos(positions)
        h = h + self.block(h)
        return self.head(h.mean(dim=1))
