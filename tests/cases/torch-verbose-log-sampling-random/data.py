"""The input pipeline: a fixed set of noisy 1-D signals, sampled into batches and augmented
with Python's ``random`` module.

Each batch is a draw of rows without replacement (``random.sample``); every row is then
shifted circularly by a few samples (``random.randint``) and reversed half of the time
(``random.random``). All three come from Python's global generator, which the training
script seeds once at start-up so that a run repeats itself. The signals themselves are
built once from a generator of their own.
"""

import math
import random

import torch

ROWS, LENGTH, CLASSES = 256, 32, 4


def signals() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2024)
    y = torch.arange(ROWS) % CLASSES
    t = torch.linspace(0.0, 1.0, LENGTH)
    freq = (y + 1).to(torch.float32).unsqueeze(1)
    x = torch.sin(2.0 * math.pi * freq * t) + 0.3 * torch.randn(ROWS, LENGTH, generator=g)
    return x, y


class AugmentedBatches:
    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch: int, max_shift: int = 3) -> None:
        self.x, self.y, self.batch, self.max_shift = x, y, batch, max_shift

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = random.sample(range(len(self.x)), self.batch)
        rows = []
        for i in idx:
            row = torch.roll(self.x[i], random.randint(-self.max_shift, self.max_shift))
            if random.random() < 0.5:
                row = row.flip(0)
            rows.append(row)
        return torch.stack(rows), self.y[idx]
