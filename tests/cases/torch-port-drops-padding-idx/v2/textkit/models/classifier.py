"""The text classifier: token embedding, convolutional encoder, masked mean, norm, head."""

import torch
import torch.nn as nn

from ..nn import ConvEncoder, TokenEmbedding, masked_mean
from ..vocab import PAD


class TextClassifier(nn.Module):
    def __init__(self, vocab: int, classes: int, dim: int = 32, channels: int = 48) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab, dim)
        self.encoder = ConvEncoder(dim, channels)
        self.norm = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pooled = masked_mean(self.encoder(self.embed(tokens)), tokens != PAD)
        return self.head(self.norm(pooled))
