"""A small classifier with a tower of gated mixture blocks (layers.py), trained with AdamW.

    python train.py --out DIR [--epochs 3] [--recompute]

An epoch is four batches; the rows of step N come from a generator seeded with N, and the
global torch generator only draws the initial weights (no dropout, no other draws).
``--recompute`` turns on activation checkpointing for the blocks: the same model, data and
optimizer, less activation memory.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from layers import Tower

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, EXPERTS = 16, 32, 5, 4
BATCHES_PER_EPOCH = 4


class Classifier(nn.Module):
    def __init__(self, recompute: bool = False) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.tower = Tower(WIDTH, 2, EXPERTS, BATCHES_PER_EPOCH, recompute)
        self.head = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.tower(self.inp(x)))


def batch(step: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4000 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--recompute", action="store_true", help="activation checkpointing")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(5)
    model = Classifier(recompute=args.recompute)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for epoch in range(args.epochs):
            for i in range(BATCHES_PER_EPOCH):
                step = epoch * BATCHES_PER_EPOCH + i
                x, y = batch(step)
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
