"""A small convolutional classifier trained data-parallel on two CPU ranks (DDP over gloo).

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py \
        --clip-order average-first --out DIR

Each step accumulates the summed gradients of three micro-batches (DDP synchronises on the
last one), turns the sum into a mean and clips it at a fixed global norm. ``--clip-order``
says whether the mean is taken before clipping, or the sum is clipped at the scaled limit.
"""

import argparse
import contextlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from triage_agent.metrics import MetricLog

MICRO_BATCHES, MAX_NORM = 3, 0.25


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv1d(1, 8, 5, padding=2),
        nn.GroupNorm(2, 8),
        nn.ReLU(),
        nn.Conv1d(8, 8, 5, padding=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(4),
        nn.Flatten(),
        nn.Linear(32, 3),
    )


def micro_batch(step: int, micro: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 * step + 100 * micro + rank)
    label = torch.randint(0, 3, (8,), generator=g)
    t = torch.linspace(0, 1, 64)
    x = torch.sin((label[:, None] + 1) * 6.0 * t) + 0.3 * torch.randn(8, 64, generator=g)
    return x[:, None, :], label


def mean_and_clip(params: list[torch.nn.Parameter], order: str) -> torch.Tensor:
    """Turn the accumulated gradient sums into clipped means; return the mean's norm."""
    if order == "average-first":
        for q in params:
            q.grad.div_(MICRO_BATCHES)
        return torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
    total = torch.nn.utils.clip_grad_norm_(params, MAX_NORM * MICRO_BATCHES)
    for q in params:
        q.grad.div_(MICRO_BATCHES)
    return total / MICRO_BATCHES


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--clip-order", choices=["average-first", "clip-first"], required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(build_model())
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.2, momentum=0.9, weight_decay=1e-4)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        total = torch.zeros(())
        for micro in range(MICRO_BATCHES):
            last = micro == MICRO_BATCHES - 1
            with contextlib.nullcontext() if last else model.no_sync():
                x, y = micro_batch(step, micro, rank)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
            total += loss.detach()
        norm = mean_and_clip(params, args.clip_order)
        opt.step()
        log.log(step, loss=total / MICRO_BATCHES, grad_norm=norm)
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
