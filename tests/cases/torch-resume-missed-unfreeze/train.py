"""Fine-tune a small sequence classifier (model.py) with AdamW on the CPU, one process,
with checkpoint and resume. The encoder is held frozen for the first steps and then
trained with the head (schedule.py); it has its own, lower learning rate.

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 5 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

The batch of step N comes from a generator seeded with N; the global generator only draws
the initial weights, and the model has no dropout.
"""

import argparse

import ckpt
import torch
import torch.nn.functional as F
from model import CLASSES, VOCAB, Classifier
from schedule import GradualUnfreeze

from triage_agent.metrics import MetricLog

UNFREEZE_AT = 3


def batch(step: int, rows: int = 32, length: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7000 + 13 * step)
    ids = torch.randint(0, VOCAB, (rows, length), generator=g)
    y = (ids[:, :3].sum(dim=1) + ids[:, -1]) % CLASSES
    return ids, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = Classifier()
    callbacks = [GradualUnfreeze(model.encoder, UNFREEZE_AT)]
    opt = torch.optim.AdamW(
        [
            {"params": model.encoder.parameters(), "lr": 1e-3},
            {"params": model.head.parameters(), "lr": 5e-3},
        ],
        weight_decay=0.01,
    )
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, model, opt)
        first = resumed + 1
    model.train()
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            for cb in callbacks:
                cb.on_step_begin(step)
            ids, y = batch(step)
            loss = F.cross_entropy(model(ids), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()
