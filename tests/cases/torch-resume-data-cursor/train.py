"""A text-classification MLP trained with AdamW in one process, with checkpoint and resume.

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 5 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

The data stream (data.py) keeps its position; the checkpoint holds it with the model and
the optimizer.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from data import CLASSES, FEATURES, EpochStream

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, required=True, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.GELU(), nn.Linear(64, CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    stream = EpochStream()
    step, resumed = 0, None
    if args.resume:
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        stream.load_state_dict(ckpt["data"])
        step = resumed = ckpt["step"]
        step += 1
    log = MetricLog(args.out, rank=0, resumed_from=resumed)
    while step <= args.steps_to:
        stream.set_epoch(stream.epoch)
        while stream.batches_left() and step <= args.steps_to:
            x, y = stream.next_batch()
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            step += 1
        if not stream.batches_left():
            stream.epoch += 1
    log.close()
    if args.save:
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "data": stream.state_dict(),
                "step": step - 1,
            },
            args.save,
        )


if __name__ == "__main__":
    main()
