"""A small MLP classifier with dropout after both hidden layers, trained with AdamW on the CPU.

    python train.py --out DIR [--steps 10] [--reuse-mask]

The data of step N come from a generator seeded with N; the dropout masks come from the
global torch generator, seeded once at start-up. ``--reuse-mask`` turns on the dropout
layers' fast path (see layers.py): the same model, data and optimizer, fewer mask draws.
"""

import argparse

import torch
import torch.nn.functional as F
from layers import MLP

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 20, 64, 4


def batch(step: int, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(700 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--reuse-mask", action="store_true", help="skip redrawing dropout masks")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = MLP(FEATURES, HIDDEN, CLASSES, p=0.2, reuse_mask=args.reuse_mask)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
