"""Entry point of a small tabular classification job: an MLP trained from scratch with
AdamW on the CPU. The job is data parallel; this process replays one rank's part of it
alone (its shard of the table, the model and optimizer as every rank builds them):

    python train.py --out DIR --steps 8 --rank 3 --world-size 6

The data package, sharddata, is found on PYTHONPATH; the job states the batch size, the
rank, the world size and the shuffling seed. The table comes from a generator seeded once,
the weights from the global generator seeded once, the order of each epoch from the
loader, so a run repeats itself bit for bit.
"""

import argparse
import itertools

import sharddata
import torch
import torch.nn as nn
import torch.nn.functional as F
from sharddata import make_loader

from triage_agent.metrics import MetricLog

ROWS, FEATURES, HIDDEN, CLASSES, BATCH = 144, 16, 32, 4, 8


def table() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5150)
    x = torch.randn(ROWS, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    net = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.AdamW(net.parameters(), lr=5e-3, weight_decay=0.01)
    loader = make_loader(
        *table(), batch_size=BATCH, rank=args.rank, world_size=args.world_size, seed=args.seed
    )
    print(f"sharddata {sharddata.__version__}: rank {args.rank} of {args.world_size}")
    step = 0
    with MetricLog(args.out, rank=0) as log:
        for epoch in itertools.count():
            loader.set_epoch(epoch)
            for x, y in loader:
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
