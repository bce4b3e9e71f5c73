"""A small MLP regressor with dropout, trained with AdamW on the CPU with gradient
accumulation: every optimizer step sums the gradients of MICRO_PER_STEP micro-batches.

    python train.py --out DIR --micro-batches 32 [--ckpt FILE --ckpt-every N] [--resume FILE]

--micro-batches is the number of micro-batches to have trained when the process exits
(counted from the start of training, also after a resume); with --ckpt the job rewrites
FILE every --ckpt-every micro-batches; --resume loads FILE and goes on from the
micro-batch it holds. The data come from a cursor over a fixed shuffled set (data.py); the
dropout masks come from the global torch generator, seeded once at start-up.
"""

import argparse

import ckpt
import torch
import torch.nn as nn
from data import FEATURES, MicroBatchStream
from trainer import Trainer

from triage_agent.metrics import MetricLog

MICRO_PER_STEP = 4


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--micro-batches", type=int, default=32)
    p.add_argument("--ckpt", help="checkpoint file, rewritten every --ckpt-every micro-batches")
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    trainer = Trainer(model, opt, MicroBatchStream(), MICRO_PER_STEP)
    resumed = None
    if args.resume:
        ckpt.read(args.resume, trainer.checkpointed())
        resumed = trainer.window.micro // MICRO_PER_STEP - 1  # the last step it holds the update of
    model.train()
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        while trainer.window.micro < args.micro_batches:
            stats = trainer.micro_step()
            if stats is not None:
                log.log(stats["step"], loss=stats["loss"], grad_norm=stats["grad_norm"])
            if args.ckpt and args.ckpt_every and trainer.window.micro % args.ckpt_every == 0:
                ckpt.write(args.ckpt, trainer.checkpointed())


if __name__ == "__main__":
    main()
