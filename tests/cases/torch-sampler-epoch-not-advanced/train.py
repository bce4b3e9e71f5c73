"""A small MLP classifier trained with AdamW on the CPU, over a synthetic dataset read in
shuffled epochs through a DataLoader whose sampler is a DistributedSampler, so that the same
script runs on one rank or on many (torchrun sets RANK and WORLD_SIZE).

    python train.py --out DIR [--epochs 4] [--batch-size 8] [--eval-every-epoch]

Each rank reads its shard of the training split in an order the sampler draws from its seed
and the epoch. With --eval-every-epoch the model is also scored on a held-out split after
every epoch (loops.py).
"""

import argparse
import os

import loops
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES = 12, 32, 4
TRAIN_ROWS, VAL_ROWS = 16, 32
SAMPLER_SEED = 1234


def synthetic(rows: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, FEATURES, generator=g)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    y = (x @ w).argmax(dim=1)
    return TensorDataset(x, y)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--eval-every-epoch", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(FEATURES, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
        nn.Linear(WIDTH, CLASSES),
    )
    if world > 1:
        model = DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

    train_set = synthetic(TRAIN_ROWS, 7)
    sampler = DistributedSampler(
        train_set, num_replicas=world, rank=rank, shuffle=True, seed=SAMPLER_SEED
    )
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=0)

    with MetricLog(args.out, rank=rank) as log:
        if args.eval_every_epoch:
            val_set = synthetic(VAL_ROWS, 8)
            loops.fit_and_evaluate(model, opt, loader, val_set, args.epochs, log)
        else:
            loops.fit(model, opt, loader, args.epochs, log)

    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
