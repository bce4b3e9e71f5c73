"""A small tabular classifier trained with AdamW on the CPU, a few epochs over a fixed table.

    python train.py --out DIR [--epochs 3] [--cache-data]

The table (data.py) serves the same three batches every epoch; the global torch generator
only draws the initial weights, and the model has no dropout. ``--cache-data`` keeps the
decoded batches after the first epoch instead of decoding them again (see data.py): the same
model, rows and optimizer, less work per epoch. One step per batch (trainer.py).
"""

import argparse

import torch
import torch.nn as nn
import trainer
from data import CLASSES, FEATURES, ShardedTable, feature_stats

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--cache-data", action="store_true", help="keep decoded batches in memory")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, CLASSES)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    table = ShardedTable(batches=3, rows=48, cache=args.cache_data)
    mean, std = feature_stats()
    model.train()
    step = 0
    with MetricLog(args.out, rank=0) as log:
        for _epoch in range(args.epochs):
            for x, y in table.epoch():
                loss, norm = trainer.train_step(model, opt, x, y, mean, std)
                log.log(step, loss=loss, grad_norm=norm)
                step += 1


if __name__ == "__main__":
    main()
