"""A small MLP classifier trained with AdamW on the CPU, its batches shuffled and jittered
with numpy (data.py).

    python train.py --out DIR --steps 10 [--audit-every N]

numpy's global generator is seeded once at start-up and the torch one for the weights, so
a run repeats itself bit for bit. With --audit-every N a few rows of every N-th batch are
checked and printed (audit.py).
"""

import argparse

import audit
import data
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=48)
    p.add_argument("--audit-every", type=int, default=0, help="check a few rows every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(5)
    np.random.seed(1234)
    x, y = data.table()
    batches = data.JitteredBatches(x, y, args.batch)
    model = nn.Sequential(
        nn.Linear(data.FEATURES, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
        nn.Linear(64, data.CLASSES),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    check = audit.BatchAudit(args.audit_every, data.CLASSES)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            xb, yb = batches.next()
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            check(step, xb, yb)


if __name__ == "__main__":
    main()
