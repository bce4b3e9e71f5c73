"""A small tabular classifier trained data-parallel on two CPU ranks (DDP over gloo), with
a class-weighted cross-entropy against the table's class imbalance.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --out DIR

shardset (on PYTHONPATH) gives each rank its block of the table's rows, recorded in order
as the class mix drifted, and the loss's class weights. Every rank seeds alike.
"""

import argparse
import itertools

import shardset
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from shardset import make_shard
from torch.nn.parallel import DistributedDataParallel

from triage_agent.metrics import MetricLog

ROWS, FEATURES, HIDDEN, CLASSES, BATCH = 192, 16, 32, 4, 16


def table() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5150)
    x = torch.randn(ROWS, FEATURES, generator=g)
    drift = torch.linspace(-1.0, 1.0, ROWS)[:, None] * torch.tensor([1.2, 0.4, -0.4, -1.2])
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES] + drift).argmax(dim=1)
    return x, y


def epochs(data):
    for epoch in itertools.count():
        data.set_epoch(epoch)
        yield from data


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(17)
    net = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, CLASSES),
    )
    model = DistributedDataParallel(net)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    data = make_shard(*table(), CLASSES, BATCH, rank=rank, world_size=world, seed=3)
    print(f"rank {rank}: shardset {shardset.__version__}, weights {data.class_weights.tolist()}")
    with MetricLog(args.out, rank=rank) as log:
        for step, (x, y) in enumerate(itertools.islice(epochs(data), args.steps)):
            loss = F.cross_entropy(model(x), y, weight=data.class_weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
