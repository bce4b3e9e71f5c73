"""Fine-tuning a small classifier: a backbone MLP and a new linear head, trained with AdamW
on the CPU, the head at four times the backbone's learning rate.

    python train.py --out DIR [--steps 10] [--finetune-schedule]

The data of step N come from a generator seeded with N; the global torch generator only
draws the initial weights, and the model has no dropout. After every optimizer step the
trainer calls its registered callbacks with the step and the optimizer.
``--finetune-schedule`` labels the run "finetune" in its log lines and registers the
fine-tuning schedule's callback (callbacks.py), which keeps the head's rate tied to the
backbone's.
"""

import argparse

import callbacks
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 20, 64, 5
BASE_LR, HEAD_MULT = 1e-3, 4.0


def batch(step: int, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5300 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--finetune-schedule", action="store_true", help="fine-tuning schedule and label")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    backbone = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU())
    head = nn.Linear(HIDDEN, CLASSES)
    opt = torch.optim.AdamW(
        [
            {"params": backbone.parameters(), "name": "backbone", "lr": BASE_LR},
            {"params": head.parameters(), "name": "head", "lr": BASE_LR * HEAD_MULT},
        ],
        lr=BASE_LR,
        weight_decay=0.01,
    )
    step_callbacks = []
    label = "train"
    if args.finetune_schedule:
        label = "finetune"
        step_callbacks.append(callbacks.TiedHeadLR("head", "backbone", HEAD_MULT))
    params = [*backbone.parameters(), *head.parameters()]
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(head(backbone(x)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            for cb in step_callbacks:
                cb.on_step_end(step, opt)
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"[{label}] step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
