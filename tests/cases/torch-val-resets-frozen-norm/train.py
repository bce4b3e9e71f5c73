"""Fine-tune a pretrained classifier (model.py) on a shifted target domain with AdamW, on CPU.

    python train.py --out DIR [--steps 8] [--val-every N]

The backbone's BatchNorm layers stay frozen (model.freeze_bn). The rows of step N come from
a generator seeded with N, the source sample and the held-out set from generators seeded
once; the global torch generator only draws the initial weights. With --val-every N the
model is scored on the held-out set (validation.py) after every N-th step.
"""

import argparse

import torch
import torch.nn.functional as F
import validation
from model import freeze_bn, pretrained

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 16, 4
MIX = torch.linspace(0.5, 2.0, FEATURES)


def _rows(n: int, g: torch.Generator, shift: float) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.randn(n, FEATURES, generator=g)
    y = (z[:, :CLASSES] + 0.5 * z[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return z * MIX + shift, y


def batch(step: int, rows: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(rows, torch.Generator().manual_seed(4000 + step), shift=0.8)


def held_out(rows: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(rows, torch.Generator().manual_seed(21), shift=0.8)


def source_sample(rows: int = 256) -> torch.Tensor:
    return _rows(rows, torch.Generator().manual_seed(3), shift=0.0)[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--val-every", type=int, default=0, help="validate after every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(5)
    model = pretrained(FEATURES, CLASSES, source_sample())
    model.train()
    freeze_bn(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    val_x, val_y = held_out()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if args.val_every and (step + 1) % args.val_every == 0:
                stats = validation.evaluate(model, val_x, val_y)
                print(
                    f"step {step}: val_loss {stats['val_loss']:.4f} val_acc {stats['val_acc']:.3f}"
                )


if __name__ == "__main__":
    main()
