"""Token embedding, one convolution over the sequence, a mean over the real tokens, a head."""

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0


class ConvClassifier(nn.Module):
    def __init__(self, vocab: int, classes: int, dim: int = 32, channels: int = 48) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.conv = nn.Conv1d(dim, channels, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = (tokens != PAD).unsqueeze(-1).float()
        h = F.gelu(self.conv(self.embed(tokens).transpose(1, 2))).transpose(1, 2)
        h = (h * mask).sum(dim=1) / mask.sum(dim=1)
        return self.head(self.norm(h))
