"""A small MLP classifier (model.py) trained with AdamW on the CPU.

    python train.py --out DIR --last-step 9
    python train.py --out DIR --last-step 4 --save ckpt.pt
    python train.py --out DIR --last-step 9 --resume ckpt.pt

--save writes a checkpoint (the model's state dict, the optimizer, the next step) after the
last step; --resume loads one and continues from the step it holds. The rows of step N come
from a generator seeded with N; the global generator only draws the initial weights, and
the model has no dropout.
"""

import argparse

import torch
import torch.nn.functional as F
from model import Classifier

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 20, 4


def batch(step: int, rows: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5003 + 17 * step)
    x = torch.randn(rows, FEATURES, generator=g) * torch.linspace(0.5, 3.0, FEATURES)
    y = (x[:, :CLASSES] - 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--last-step", type=int, default=9)
    ap.add_argument("--save")
    ap.add_argument("--resume")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    model = Classifier(FEATURES, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    step = 0
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step = ckpt["step"]
    model.train()
    with MetricLog(args.out, rank=0, resumed_from=step - 1 if args.resume else None) as log:
        while step <= args.last_step:
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            step += 1
    if args.save:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, args.save)


if __name__ == "__main__":
    main()
