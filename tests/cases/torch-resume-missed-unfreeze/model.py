"""A small sequence classifier: an encoder (token embedding, a 1-D convolution and an MLP,
mean-pooled) that the job treats as pretrained, and a linear head on top."""

import torch
import torch.nn as nn

VOCAB, WIDTH, CLASSES = 40, 32, 5


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.ModuleDict(
            {
                "embed": nn.Embedding(VOCAB, WIDTH),
                "conv": nn.Conv1d(WIDTH, WIDTH, kernel_size=3, padding=1),
                "mlp": nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU()),
            }
        )
        self.head = nn.Linear(WIDTH, CLASSES)

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        e = self.encoder["embed"](ids)                                  # (B, T, W)
        h = e + torch.tanh(self.encoder["conv"](e.transpose(1, 2))).transpose(1, 2)
        h = h + self.encoder["mlp"](h)
        return h.mean(dim=1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(ids))
