"""A small MLP classifier over a long-tailed set of 1000 classes, trained with AdamW and a
logit-adjusted cross-entropy on the CPU, one process.

    python train.py --out DIR --steps 8 --seed 5

The class shards are read at start-up (data.py), the class prior is counted from their
labels (balance.py), and each step trains on a batch drawn from a generator seeded with the
seed and the step. Each step logs the exact bits of the loss and of the global gradient
norm.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from balance import log_class_prior
from data import load_shards

from triage_agent.metrics import MetricLog

NUM_CLASSES, DIM, WIDTH, BATCH = 1000, 32, 64, 128


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM, WIDTH)
        self.norm = nn.LayerNorm(WIDTH)
        self.fc2 = nn.Linear(WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc1(x))
        h = h + F.gelu(self.fc2(self.norm(h)))
        return self.head(h)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--tau", type=float, default=1.0, help="logit adjustment strength")
    args = p.parse_args()
    torch.set_num_threads(1)
    x, y = load_shards(args.seed, NUM_CLASSES, DIM)
    adjust = args.tau * log_class_prior(y, NUM_CLASSES)
    torch.manual_seed(args.seed)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            g = torch.Generator().manual_seed(args.seed * 1000 + step)
            idx = torch.randint(0, len(y), (BATCH,), generator=g)
            loss = F.cross_entropy(model(x[idx]) + adjust, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
