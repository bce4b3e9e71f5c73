"""Fit a small MLP to a noisy nonlinear regression target in float16 autocast on the CPU,
with a dynamic loss scaler.

    python train.py --out DIR --last-step 11
    python train.py --out DIR --last-step 5 --save ckpt.pt
    python train.py --out DIR --last-step 11 --resume ckpt.pt

--save writes a checkpoint (model, optimizer, loss scaler, next step) after the last step;
--resume loads one and continues from the step it holds.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from scaler import DynamicLossScaler

from triage_agent.metrics import MetricLog

FEATURES = 24


def batch(step: int, rows: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7919 * step + 3)
    x = torch.randn(rows, FEATURES, generator=g)
    y = torch.tanh(x[:, :8].sum(dim=1, keepdim=True) * 0.4) + 0.1 * torch.randn(rows, 1, generator=g)
    return x, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--last-step", type=int, default=11)
    ap.add_argument("--save")
    ap.add_argument("--resume")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 48), nn.GELU(), nn.Linear(48, 48), nn.GELU(), nn.Linear(48, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=2.5e-3, weight_decay=0.01)
    scaler = DynamicLossScaler()
    step = 0
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        scaler.load_state_dict(ckpt["scaler"])
        step = ckpt["step"]
    with MetricLog(args.out, rank=0, resumed_from=step - 1 if args.resume else None) as log:
        while step <= args.last_step:
            x, y = batch(step)
            with torch.autocast("cpu", dtype=torch.float16):
                pred = model(x)
            loss = F.mse_loss(pred.float(), y)
            opt.zero_grad()
            scaler.scale_loss(loss).backward()
            finite = scaler.unscale_(model.parameters())
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if finite:
                opt.step()
            scaler.update(finite)
            log.log(step, loss=loss.detach(), grad_norm=norm)
            step += 1
    if args.save:
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(),
             "scaler": scaler.state_dict(), "step": step},
            args.save,
        )


if __name__ == "__main__":
    main()
