"""Start-up of the data-parallel job: the model, its optimizer and each rank's data stream.

The ranks keep their replicas in step without a DDP wrapper and without a broadcast: every
rank seeds torch with the same base seed before the model is built, so they all draw the
same initial weights, and the training step averages the gradients over the ranks after
each backward. Each rank's data then come from torch's generator seeded with the base seed
plus the rank, so the ranks see different rows.
"""

from __future__ import annotations

import torch
import torch.nn as nn

FEATURES, WIDTH, CLASSES, BATCH = 20, 48, 6, 16


class Classifier(nn.Module):
    """A small residual MLP classifier (no dropout: nothing draws after start-up)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.block = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        h = h + self.block(h)
        return self.head(self.norm(h))


class RankStream:
    """This rank's batches, drawn from torch's generator seeded with base seed + rank."""

    def __init__(self, seed: int, rank: int) -> None:
        torch.manual_seed(seed + rank)
        self._ready: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(BATCH, FEATURES) * 1.25
        y = ((x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)) % CLASSES
        return x, y

    def warm(self) -> RankStream:
        """Prepare the first batch now, so the first step does not wait for it."""
        if not self._ready:
            self._ready.append(self._draw())
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._ready.pop(0) if self._ready else self._draw()


def build_model() -> Classifier:
    return Classifier()


def setup_training(args, rank: int):
    """The model, its AdamW and this rank's data stream."""
    torch.manual_seed(args.seed)
    stream = None
    if args.warm_start_data:
        stream = RankStream(args.seed, rank).warm()
    model = build_model()
    if stream is None:
        stream = RankStream(args.seed, rank)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    return model, opt, stream
