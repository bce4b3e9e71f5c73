"""A deep, narrow residual MLP regressor trained with AdamW on the CPU, with checkpoint and
resume.

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 4 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

Weights decay, biases do not (two parameter groups). The batch of step N comes from a
generator seeded with N; nothing draws after initialisation.
"""

import argparse
from collections.abc import Iterable

import ckpt
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, DEPTH = 16, 32, 12


class ResidualMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(DEPTH))
        self.out = nn.Linear(WIDTH, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for layer in self.layers:
            h = h + 0.5 * F.gelu(layer(h))
        return self.out(h)


def build_optimizer(named: Iterable[tuple[str, nn.Parameter]]) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for _, p in named:
        (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=2e-3, betas=(0.9, 0.99))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7919 + 13 * step)
    x = torch.randn(64, FEATURES, generator=g)
    y = torch.sin(x[:, :3].sum(1, keepdim=True)) + 0.1 * x[:, 3:4] ** 2
    return x, y + 0.02 * torch.randn(64, 1, generator=g)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = ResidualMLP()
    first, resumed = 0, None
    if args.resume:
        opt, resumed = ckpt.resume_from(args.resume, model, build_optimizer)
        first = resumed + 1
    else:
        opt = build_optimizer(model.named_parameters())
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, y = batch(step)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()
