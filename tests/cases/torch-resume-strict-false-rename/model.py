"""A conditioned regressor: an MLP over the features whose hidden activations are scaled and
shifted by a linear map of a small conditioning vector (feature-wise linear modulation).

    h = GELU(stem x)
    h = h * (1 + scale(c)) + shift(c)      # scale, shift = modulation(c).chunk(2)
    y = head(dropout(GELU(body h)))
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

FEATURES, COND, HIDDEN = 16, 4, 64


class ConditionedNet(nn.Module):
    def __init__(self, features: int = FEATURES, cond: int = COND, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.stem = nn.Linear(features, hidden)
        self.modulation = nn.Linear(cond, 2 * hidden)
        self.body = nn.Linear(hidden, hidden)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.stem(x))
        scale, shift = self.modulation(c).chunk(2, dim=-1)
        h = h * (1.0 + scale) + shift
        return self.head(self.drop(F.gelu(self.body(h))))
