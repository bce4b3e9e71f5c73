"""A small residual MLP trained with SGD-momentum and gradient accumulation (plain PyTorch).

    python train.py --config a.json --out DIR

The JSON config gives the optimizer settings and how micro-batch gradients are accumulated
into a mean: "before-backward" scales each micro-batch loss by 1/steps, "after-backward"
sums the raw gradients and divides the sum by the number of micro-batches.
"""

import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


class ResidualMLP(nn.Module):
    def __init__(self, width: int = 48, depth: int = 3) -> None:
        super().__init__()
        self.inp = nn.Linear(12, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU())
            for _ in range(depth)
        )
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h).squeeze(-1)


def micro_batch(step: int, micro: int, size: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 97 + micro)
    x = torch.randn(size, 12, generator=g)
    return x, (x[:, 0] * x[:, 1] - x[:, 2].abs()).tanh()


def accumulate(model: nn.Module, step: int, cfg: dict) -> torch.Tensor:
    steps, where = cfg["accumulation"]["steps"], cfg["accumulation"]["average"]
    total = torch.zeros(())
    for micro in range(steps):
        x, y = micro_batch(step, micro)
        loss = F.mse_loss(model(x), y)
        (loss / steps if where == "before-backward" else loss).backward()
        total += loss.detach() / steps
    if where == "after-backward":
        for p in model.parameters():
            p.grad.div_(steps)
    return total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    with open(args.config) as fh:
        cfg = json.load(fh)
    torch.set_num_threads(1)
    torch.manual_seed(cfg["seed"])
    model = ResidualMLP()
    opt = torch.optim.SGD(model.parameters(), **cfg["optimizer"])
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            opt.zero_grad(set_to_none=True)
            loss = accumulate(model, step, cfg)
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
            opt.step()
            log.log(step, loss=loss, grad_norm=norm)


if __name__ == "__main__":
    main()
