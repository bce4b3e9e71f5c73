"""A residual MLP regressor on a synthetic physics-like target, optimised with Lion.

python main.py --metrics DIR [--update per-tensor|foreach] [--iters 8]
"""

import argparse

import torch
import torch.nn as nn
from lion import make_lion

from triage_agent.metrics import MetricLog


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


def batches(seed: int, rows: int = 128):
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.rand(rows, 10, generator=g) * 2 - 1
        y = (x[:, :5] * x[:, 5:]).sum(1, keepdim=True) + torch.cos(3 * x[:, :1])
        yield x, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--update", choices=["per-tensor", "foreach"], default="per-tensor")
    opts = ap.parse_args()
    torch.manual_seed(123)
    net = nn.Sequential(nn.Linear(10, 32), Block(32), Block(32), nn.Linear(32, 1))
    step_fn = make_lion(net.parameters(), lr=3e-4, wd=0.3, foreach=opts.update == "foreach")
    with MetricLog(opts.metrics, rank=0) as log:
        for it, (x, y) in zip(range(opts.iters), batches(seed=2), strict=False):
            for p in net.parameters():
                p.grad = None
            loss = nn.functional.mse_loss(net(x), y)
            loss.backward()
            gnorm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in net.parameters()]))
            step_fn()
            log.log(it, loss=loss.detach(), grad_norm=gnorm)


if __name__ == "__main__":
    main()
