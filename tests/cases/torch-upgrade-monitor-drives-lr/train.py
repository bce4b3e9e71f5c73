"""Entry point of a small tabular classification job: an MLP trained from scratch with
AdamW on the CPU, in one process, through the team's fitloop Trainer
(python train.py --out DIR --steps 8).
fitloop is found on PYTHONPATH; torch's ReduceLROnPlateau halves the learning rate when
the smoothed loss stops improving. The data of step N come from a generator seeded with N,
the weights from the global generator seeded once, so a run repeats itself bit for bit.
"""

import argparse

import fitloop
import torch
import torch.nn as nn
import torch.nn.functional as F
from fitloop import Trainer

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def batch(step: int, size: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7300 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    net = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.01)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    trainer = Trainer(net, opt, F.cross_entropy, scheduler=plateau, clip=1.0)
    print(f"fitloop {fitloop.__version__}")
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            res = trainer.train_step(*batch(step))
            log.log(step, loss=res.loss, grad_norm=res.grad_norm, lr=res.lr)
            print(f"step {step}: loss {res.loss.item():.6f} lr {res.lr:g} ({res.smoothed:.6f})")


if __name__ == "__main__":
    main()
