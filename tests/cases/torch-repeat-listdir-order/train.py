"""A small MLP regressor trained with Adam in one process (plain PyTorch, CPU).

    python train.py --out DIR --steps 8

At start-up the job writes its training shards into DIR/shards (tagged with the job id the
launcher gives it in JOB_ID), reads them back as one dataset and trains on consecutive
batches of it. Each step logs the exact bits of the loss and the gradient norm.
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from shards import FEATURES, load_dataset, write_shards

from triage_agent.metrics import MetricLog

BATCH = 48


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    root = os.path.join(args.out, "shards")
    write_shards(root, os.environ.get("JOB_ID", "local"))
    x, y = load_dataset(root)
    torch.manual_seed(17)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.SiLU(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            lo = (step * BATCH) % x.shape[0]
            xb, yb = x[lo : lo + BATCH], y[lo : lo + BATCH]
            loss = F.mse_loss(model(xb).squeeze(-1), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
