"""A wide two-layer MLP trained on one CUDA device with long inner products (plain PyTorch,
fp32, TF32 off).

    python train.py --out DIR
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, BATCH = 16384, 128, 64


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(12)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 8)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(BATCH, FEATURES, generator=g).cuda()
            y = torch.randint(0, 8, (BATCH,), generator=g).cuda()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
