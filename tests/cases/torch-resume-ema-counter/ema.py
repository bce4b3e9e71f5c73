"""An exponential moving average of a model's weights, kept as a module of its own.

The decay warms up with the number of updates the average has taken,
``min(max_decay, (1 + n) / (10 + n))``, so the early average follows the weights closely
and settles as training goes on.
"""

import copy

import torch
import torch.nn as nn


class ModelEMA:
    def __init__(self, model: nn.Module, max_decay: float = 0.999) -> None:
        self.module = copy.deepcopy(model).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.max_decay = max_decay
        self.updates = 0

    def decay(self) -> float:
        n = self.updates
        return min(self.max_decay, (1 + n) / (10 + n))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        d = self.decay()
        self.updates += 1
        for e, p in zip(self.module.parameters(), model.parameters(), strict=True):
            e.mul_(d).add_(p.detach(), alpha=1.0 - d)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)

    def state_dict(self) -> dict:
        return {"shadow": self.module.state_dict(), "max_decay": self.max_decay}

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        self.module.load_state_dict(state.pop("shadow"))
        for name, value in state.items():
            setattr(self, name, value)
