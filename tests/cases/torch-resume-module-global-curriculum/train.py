"""Train a small sequence classifier (model.py) with AdamW on the CPU, one process, with a
sequence-length curriculum (curriculum.py) and checkpoint/resume (ckpt.py).

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 5 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

Torch's global generator draws the initial weights, every batch and the dropout masks; the
checkpoint saves and restores it with the model, the optimizer and the step.
"""

import argparse

import ckpt
import curriculum
import torch
import torch.nn.functional as F
from data import CLASSES, VOCAB, next_batch
from model import Classifier

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = Classifier(VOCAB, curriculum.MAX_LEN, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, model, opt)
        first = resumed + 1
    model.train()
    curriculum.on_train_begin(first)
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            ids, y = next_batch()
            loss = F.cross_entropy(model(ids), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            curriculum.on_step_end()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()
