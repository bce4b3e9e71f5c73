"""A small MLP classifier with dropout after both hidden layers, trained with AdamW on the CPU.

    python train.py --out DIR [--steps 10] [--save-every N --ckpt-dir DIR]

The data of step N come from a generator seeded with N, the probe batch from one seeded
once; the initial weights and the dropout masks come from the global torch generator,
seeded once at start-up. With --save-every N the job writes a checkpoint after every N-th
step (checkpointing.py).
"""

import argparse
import os

import checkpointing
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 20, 64, 4


def _rows(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def batch(step: int, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(size, torch.Generator().manual_seed(500 + step))


def probe(size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(size, torch.Generator().manual_seed(31))


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(HIDDEN, CLASSES),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--save-every", type=int, default=0, help="checkpoint after every N steps")
    p.add_argument("--ckpt-dir", default="checkpoints")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    probe_x, probe_y = probe()
    if args.save_every:
        os.makedirs(args.ckpt_dir, exist_ok=True)
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
            if args.save_every and (step + 1) % args.save_every == 0:
                path = os.path.join(args.ckpt_dir, f"step{step:04d}.pt")
                fp = checkpointing.write_checkpoint(path, model, opt, step, probe_x, probe_y)
                print(f"step {step}: checkpoint {path} (probe loss {fp:.4f})")


if __name__ == "__main__":
    main()
