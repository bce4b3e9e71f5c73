"""A small pre-activation residual MLP classifier trained with AdamW on the CPU.

    python train.py --out DIR [--steps 10] [--inplace-act]

``--inplace-act`` turns on the blocks' memory-saving path (see blocks.py): the same model,
data and optimizer, activations computed in place.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from blocks import Tower

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 16, 5


class Classifier(nn.Module):
    def __init__(self, width: int = 48, hidden: int = 96, depth: int = 3, inplace: bool = False):
        super().__init__()
        self.inp = nn.Linear(FEATURES, width)
        self.tower = Tower(width, hidden, depth, inplace=inplace)
        self.out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.tower(self.inp(x)))


def batch(step: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(500 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] - x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--inplace-act", action="store_true", help="in-place activations")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = Classifier(inplace=args.inplace_act)
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
