"""Fine-tune a small classifier (model.py) with momentum SGD on the CPU, with checkpoint and
resume (trainer.py).

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 4 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

The batch of step N comes from a generator seeded with N; the global generator only draws
the initial weights, and nothing draws after initialisation.
"""

import argparse

import torch
from model import Classifier
from trainer import Trainer

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 24, 5


def batch(step: int, rows: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5003 + 29 * step)
    x = torch.randn(rows, FEATURES, generator=g)
    logits = x[:, :CLASSES] * torch.linspace(1.0, 2.0, CLASSES) + 0.5 * x[:, CLASSES : 2 * CLASSES]
    return x, logits.argmax(dim=1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    trainer = Trainer(Classifier(FEATURES, CLASSES))
    first, resumed = 0, None
    if args.resume:
        resumed = trainer.load_checkpoint(args.resume)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            loss, norm = trainer.train_step(*batch(step))
            log.log(step, loss=loss, grad_norm=norm)
    if args.save:
        trainer.save_checkpoint(args.save, args.steps_to)


if __name__ == "__main__":
    main()
