"""A bf16 token-mixing MLP trained data-parallel on two CPU ranks (gloo): fp32 master
weights and main gradients, two accumulated micro-batches per step.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --fold 1 --out DIR
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from gradsync import FoldedGradReducer, GradReducer

from triage_agent.metrics import MetricLog

TOKENS, WIDTH, MICRO = 16, 32, 2


class Mixer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.token_mix = nn.Linear(TOKENS, TOKENS)
        self.channel = nn.Sequential(
            nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH)
        )
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mix(x.transpose(1, 2)).transpose(1, 2)
        x = x + self.channel(x)
        return self.head(x.mean(dim=1))


def micro_batch(step: int, micro: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 1009 + micro * 31 + rank)
    x = torch.randn(8, TOKENS, WIDTH, generator=g)
    return x.bfloat16(), (x[:, :, :4].mean(dim=1)).argmax(dim=1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--fold", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(8)
    model = Mixer().bfloat16()
    params = list(model.parameters())
    master = [q.detach().float().requires_grad_() for q in params]
    opt = torch.optim.AdamW(master, lr=1e-3, weight_decay=0.01)
    reducer = GradReducer(world) if args.fold == 1 else FoldedGradReducer(world, args.fold)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        for q in params:
            q.main_grad = torch.zeros_like(q, dtype=torch.float32)
        total = 0.0
        for micro in range(MICRO):
            x, y = micro_batch(step, micro, rank)
            loss = F.cross_entropy(model(x).float(), y) / MICRO
            loss.backward()
            for q in params:
                reducer.reduce_into(q)
                q.grad = None
            total += float(loss)
        for m, q in zip(master, params, strict=True):
            m.grad = q.main_grad
        norm = torch.nn.utils.clip_grad_norm_(master, 1.0)
        opt.step()
        with torch.no_grad():
            for m, q in zip(master, params, strict=True):
                q.copy_(m)
        log.log(step, loss=total, grad_norm=norm)
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
