"""A multi-task classifier: one shared encoder and a linear head per task.

A batch belongs to one task, and only that task's head scores it; the other head takes no
part in the step.
"""

import torch
import torch.nn as nn

TASKS = {"intent": 5, "domain": 3}


class MultiTaskNet(nn.Module):
    def __init__(self, features: int, hidden: int = 64) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(features, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU()
        )
        self.heads = nn.ModuleDict({t: nn.Linear(hidden, n) for t, n in TASKS.items()})

    def forward(self, x: torch.Tensor, task: str) -> torch.Tensor:
        return self.heads[task](self.encoder(x))
