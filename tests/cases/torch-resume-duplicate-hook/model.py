"""A classifier in two parts: a feature backbone (an MLP with layer norm) and a linear head.

The backbone is the part a fine-tuning job starts from; the head is new for the task."""

import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, width: int = 64) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(features, width), nn.GELU(), nn.LayerNorm(width),
            nn.Linear(width, width), nn.GELU(),
        )
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))
