"""A small residual MLP classifier with dropout in every block, trained with AdamW.

    python train.py --out DIR [--recompute]

``--recompute`` turns on activation checkpointing for the blocks (see blocks.py): the
same model and data, less activation memory.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from blocks import Tower

from triage_agent.metrics import MetricLog

CLASSES = 5


class Classifier(nn.Module):
    def __init__(self, width: int = 48, depth: int = 4, recompute: bool = False) -> None:
        super().__init__()
        self.inp = nn.Linear(16, width)
        self.tower = Tower(width, depth, p=0.1, recompute=recompute)
        self.out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.tower(self.inp(x)))


def batch(step: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, 16, generator=g)
    y = (x[:, :CLASSES] * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--recompute", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    model = Classifier(recompute=args.recompute)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
