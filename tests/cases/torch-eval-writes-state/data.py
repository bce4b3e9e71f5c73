"""A synthetic table: features on very different scales and offsets, a label from a few of
them. The rows of training step N come from a generator seeded with N; the held-out set
from one seeded once. Nothing here touches the global generators."""

import torch

FEATURES, CLASSES = 16, 4
SCALE = torch.logspace(-1, 2, FEATURES)
OFFSET = torch.linspace(-20.0, 35.0, FEATURES)
WEIGHTS = torch.linspace(1.0, 2.5, CLASSES)


def _rows(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.randn(n, FEATURES, generator=g)
    y = (z[:, :CLASSES] * WEIGHTS + 0.5 * z[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return z * SCALE + OFFSET, y


def batch(step: int, rows: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(rows, torch.Generator().manual_seed(9000 + step))


def held_out(rows: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(rows, torch.Generator().manual_seed(77))
