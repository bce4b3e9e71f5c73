"""Self-distillation on a small classifier: an MLP trained with AdamW on the CPU, whose loss
adds a KL term towards the soft predictions of an exponential moving average of its own
weights (ema.ModelEMA), updated after every optimizer step.

    python train.py --out DIR --last-step 7
    python train.py --out DIR --last-step 3 --save ckpt.pt
    python train.py --out DIR --last-step 7 --resume ckpt.pt

--save writes a checkpoint (model, optimizer, EMA, step) after the last step; --resume loads
one and continues from the step after it. The data of step N come from a generator seeded
with N; nothing else draws after initialisation.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from ema import ModelEMA

from triage_agent.metrics import MetricLog

CLASSES = 4
DISTILL = 0.5
TEMPERATURE = 2.0


def batch(seed: int, rows: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 16, generator=g)
    y = (x[:, :4] + 0.3 * torch.randn(rows, 4, generator=g)).argmax(dim=1)
    view = x + 0.1 * torch.randn(rows, 16, generator=g)
    return x, view, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--last-step", type=int, default=7)
    ap.add_argument("--save")
    ap.add_argument("--resume")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = nn.Sequential(nn.Linear(16, 48), nn.GELU(), nn.Linear(48, 48), nn.GELU(), nn.Linear(48, CLASSES))
    ema = ModelEMA(model)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    held_x, _, held_y = batch(99, rows=64)
    first, resumed = 0, None
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        ema.load_state_dict(ckpt["ema"])
        resumed = ckpt["step"]
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.last_step + 1):
            x, view, y = batch(5200 + 17 * step)
            logits = model(x)
            with torch.no_grad():
                target = F.softmax(ema(view) / TEMPERATURE, dim=1)
            ce = F.cross_entropy(logits, y)
            kl = F.kl_div(F.log_softmax(logits / TEMPERATURE, dim=1), target, reduction="batchmean")
            loss = ce + DISTILL * TEMPERATURE**2 * kl
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            ema.update(model)
            with torch.no_grad():
                ema_val = F.cross_entropy(ema(held_x), held_y)
            log.log(step, loss=loss.detach(), consistency=kl.detach(), grad_norm=norm, ema_val_loss=ema_val)
    if args.save:
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "ema": ema.state_dict(),
             "step": args.last_step},
            args.save,
        )


if __name__ == "__main__":
    main()
