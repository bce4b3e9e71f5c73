"""Entry point of a small tabular classification job: an MLP trained from scratch with
AdamW on the CPU, in one process, over a fixed table of 96 rows whose columns have very
different scales and offsets (the data package standardises them).

    python train.py --out DIR --steps 8

The data package, tabprep, is found on PYTHONPATH. The table comes from a generator seeded
once, the weights from the global generator seeded once, the order of each epoch from the
dataset's seed and the epoch, so a run repeats itself bit for bit.
"""

import argparse
import itertools

import tabprep
import torch
import torch.nn as nn
import torch.nn.functional as F
from tabprep import TableDataset

from triage_agent.metrics import MetricLog

ROWS, FEATURES, HIDDEN, CLASSES, BATCH = 96, 12, 32, 3, 16


def table() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2718)
    z = torch.randn(ROWS, FEATURES, generator=g)
    y = (z[:, :CLASSES] - 0.5 * z[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    scale = torch.linspace(0.5, 8.0, FEATURES)
    offset = torch.linspace(-20.0, 30.0, FEATURES)
    return z * scale + offset, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(31)
    net = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.AdamW(net.parameters(), lr=5e-3, weight_decay=0.01)
    data = TableDataset(*table())
    print(f"tabprep {tabprep.__version__}")
    step = 0
    with MetricLog(args.out, rank=0) as log:
        for epoch in itertools.count():
            for x, y in data.batches(BATCH, epoch=epoch, seed=7):
                loss = F.cross_entropy(net(x), y)
                opt.zero_grad()
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                log.log(step, loss=loss.detach(), grad_norm=norm)
                print(f"epoch {epoch} step {step}: loss {loss.item():.6f} grad_norm {norm:.6f}")
                step += 1
                if step == args.steps:
                    return


if __name__ == "__main__":
    main()
