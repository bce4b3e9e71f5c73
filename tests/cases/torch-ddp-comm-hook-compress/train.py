"""A small residual MLP regressor trained data-parallel on two CPU ranks (DDP over gloo).

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --out DIR \
        [--steps 6] [--fp16-grad-comm]

Each rank draws its own batch from a generator seeded with the step and the rank; DDP
averages the gradients across the ranks. ``--fp16-grad-comm`` sends DDP's gradient buckets
as float16 (torch's fp16 compression communication hook), half the bytes on the wire.
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, BATCH = 16, 48, 32


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.block = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.out = nn.Linear(WIDTH, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        h = h + self.block(h)
        return self.out(h).squeeze(-1)


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(9100 + 10 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] - x[:, 3:7].mean(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--fp16-grad-comm", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(Regressor())
    if args.fp16_grad_comm:
        model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=norm)
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
