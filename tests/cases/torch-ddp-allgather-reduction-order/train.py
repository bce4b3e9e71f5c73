"""A bf16 residual MLP regressor trained data-parallel on two CPU ranks (gloo), with
float32 master weights and AdamW; the ranks average their gradients themselves.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py \
        --grad-sync allreduce --out DIR

Each rank draws its own batch from a generator seeded with the step and the rank.
``--grad-sync`` picks how the gradients are averaged across the ranks (see gradsync.py).
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from gradsync import SYNC, sync_gradients

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, BATCH = 24, 64, 32


class Net(nn.Module):
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
    g = torch.Generator().manual_seed(5000 + 10 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = (x[:, 0] * x[:, 1] + x[:, 2:6].sum(dim=1)).tanh()
    return x.bfloat16(), y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--grad-sync", choices=sorted(SYNC), default="allreduce")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(3)
    model = Net().bfloat16()
    params = list(model.parameters())
    masters = [q.detach().float().requires_grad_() for q in params]
    opt = torch.optim.AdamW(masters, lr=2e-3, weight_decay=0.01)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        x, y = batch(step, rank)
        loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        sync_gradients(params, masters, world, args.grad_sync)
        norm = torch.nn.utils.clip_grad_norm_(masters, 1.0)
        opt.step()
        with torch.no_grad():
            for q, m in zip(params, masters, strict=True):
                q.copy_(m)
        log.log(step, loss=loss.detach(), grad_norm=norm)
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
