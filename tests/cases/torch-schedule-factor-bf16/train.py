"""A small MLP classifier trained with AdamW, a warm-up + cosine learning-rate schedule
and a global-norm clip (plain PyTorch, one process).

    python train.py --out DIR [--steps 8] [--dtype float32|bfloat16|float16] [--device cpu]

The batch of step N comes from a generator seeded with 4100 + N; the global generator only
draws the initial weights, and the model has no dropout. ``--dtype`` is the training dtype:
on an accelerator the forward runs under autocast in it (float16 with a GradScaler); on
the CPU the forward runs as is, in float32. Each step logs the exact bits of its loss, its
gradient norm before the clip and the learning rate its update uses.
"""

import argparse
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from schedule import build_scheduler

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, BATCH = 16, 64, 4, 32


@dataclass
class RunConfig:
    steps: int = 8
    warmup: int = 4
    lr: float = 3e-3
    lr_floor: float = 0.1
    weight_decay: float = 0.01
    max_norm: float = 1.0
    dtype: str = "float32"
    device: str = "cpu"


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, WIDTH),
        nn.GELU(),
        nn.LayerNorm(WIDTH),
        nn.Linear(WIDTH, WIDTH),
        nn.GELU(),
        nn.Linear(WIDTH, CLASSES),
    )


def batch(step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4100 + step)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] * x[:, 2] > 0).long()
    return x.to(device), y.to(device)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    cfg = RunConfig(steps=args.steps, dtype=args.dtype, device=args.device)
    torch.set_num_threads(1)
    torch.manual_seed(29)
    device = torch.device(cfg.device)
    ptdtype = getattr(torch, cfg.dtype)
    ctx = nullcontext() if device.type == "cpu" else torch.autocast(device.type, dtype=ptdtype)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.dtype == "float16")
    model = build_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = build_scheduler(opt, cfg)
    with MetricLog(args.out, rank=0) as log:
        for step in range(cfg.steps):
            x, y = batch(step, device)
            with ctx:
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_norm)
            lr = opt.param_groups[0]["lr"]
            scaler.step(opt)
            scaler.update()
            sched.step()
            log.log(step, loss=loss.detach(), grad_norm=norm, lr=lr)
            print(f"step {step}: loss {loss.item():.6f} lr {lr:.6g}")


if __name__ == "__main__":
    main()
