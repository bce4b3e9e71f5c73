"""A small CUDA training job whose forward pass pools token features with ``index_add_``.

Run twice with the same seed, it should give the same bits; on CUDA ``index_add_`` adds
colliding rows with atomics in arrival order, so it does not. Metric fingerprints per step
go to ``--out`` through MetricLog.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from triage_agent.metrics import MetricLog


class Pool(nn.Module):
    """Sum token features into buckets (a scatter-style reduction, as in MoE combine)."""

    def __init__(self, buckets: int):
        super().__init__()
        self.buckets = buckets

    def forward(self, h: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(self.buckets, h.shape[1], device=h.device, dtype=h.dtype)
        return out.index_add_(0, bucket, h)


class Model(nn.Module):
    def __init__(self, d_in: int = 64, d: int = 256, buckets: int = 64, classes: int = 10):
        super().__init__()
        self.proj = nn.Linear(d_in, d)
        self.act = nn.GELU()
        self.pool = Pool(buckets)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.act(self.proj(x)), bucket))


def batch(step: int, n: int, d_in: int, buckets: int, classes: int, device: str):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(n, d_in, generator=g)
    bucket = torch.randint(0, buckets, (n,), generator=g)
    y = torch.randint(0, classes, (buckets,), generator=g)
    return x.to(device), bucket.to(device), y.to(device)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=1 << 16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    device = "cuda"
    model = Model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    log = MetricLog(args.out, rank=0)
    for step in range(args.steps):
        x, bucket, y = batch(step, args.tokens, 64, 64, 10, device)
        loss = nn.functional.cross_entropy(model(x, bucket), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=gn.detach())
    log.close()


if __name__ == "__main__":
    main()
