"""A small MLP classifier trained data-parallel on two CPU ranks (DDP over gloo), with three
micro-batches accumulated per optimizer step and AdamW.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --out DIR \
        [--steps 5] [--accum 3] [--stream-micro-batches]

Each rank draws its own micro-batches from a generator seeded with the step, the micro-batch
and the rank. By default every step's window of micro-batches is built as a list and run by
the step loop; --stream-micro-batches feeds one continuous stream of micro-batches to the
flat streaming loop instead (loops.py), which holds no per-step list.
"""

import argparse

import loops
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, MICRO = 16, 32, 5, 8


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.block = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        h = h + self.block(h)
        return self.head(h)


def micro_batch(step: int, micro: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(9000 + 100 * step + 10 * micro + rank)
    x = torch.randn(MICRO, FEATURES, generator=g)
    y = ((x[:, 0] > 0).long() + 2 * (x[:, 1] * x[:, 2] > 0).long() + (x[:, 3] > 1).long()) % CLASSES
    return x, y


def windows(steps: int, accum: int, rank: int):
    return [[micro_batch(s, m, rank) for m in range(accum)] for s in range(steps)]


def stream(steps: int, accum: int, rank: int):
    for s in range(steps):
        for m in range(accum):
            yield micro_batch(s, m, rank)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--accum", type=int, default=3)
    p.add_argument("--stream-micro-batches", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(Classifier())
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=5e-3, weight_decay=0.01)
    log = MetricLog(args.out, rank=rank)
    if args.stream_micro_batches:
        loops.fit_streamed(
            model, opt, params, stream(args.steps, args.accum, rank), args.accum, log
        )
    else:
        loops.fit_windows(
            model, opt, params, windows(args.steps, args.accum, rank), args.accum, log
        )
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
