"""Model parts: an inverted dropout with an optional mask cache, and the MLP that uses it.

Drawing a Bernoulli mask the size of the activations costs a pass over them at every
layer and step. With ``reuse_mask`` on, the layer keeps the mask it drew and multiplies by
it again while the activations keep their shape, which skips the draw on the hot path.
"""

import torch
import torch.nn as nn


class MaskedDropout(nn.Module):
    def __init__(self, p: float, reuse_mask: bool = False) -> None:
        super().__init__()
        self.p = p
        self.reuse_mask = reuse_mask
        self._mask: torch.Tensor | None = None

    def draw(self, x: torch.Tensor) -> torch.Tensor:
        keep = 1.0 - self.p
        return torch.empty_like(x).bernoulli_(keep).div_(keep)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.reuse_mask and self._mask is not None and self._mask.shape == x.shape:
            mask = self._mask
        else:
            mask = self.draw(x)
            if self.reuse_mask:
                self._mask = mask
        return x * mask


class MLP(nn.Module):
    def __init__(
        self, features: int, hidden: int, classes: int, p: float, reuse_mask: bool = False
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.drop1 = MaskedDropout(p, reuse_mask)
        self.fc2 = nn.Linear(hidden, hidden)
        self.drop2 = MaskedDropout(p, reuse_mask)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop1(torch.relu(self.fc1(x)))
        h = self.drop2(torch.relu(self.fc2(h)))
        return self.head(h)
