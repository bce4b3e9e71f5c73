"""Train TinyLM (lm.py) on a fixed text with AdamW, one CPU process, with checkpoint and
resume.

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 4 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

The windows of step N come from a generator seeded with N; nothing draws after
initialisation.
"""

import argparse
import string

import ckpt
import torch
import torch.nn.functional as F
from lm import TinyLM

from triage_agent.metrics import MetricLog

CHARS = string.ascii_lowercase + string.ascii_uppercase + string.digits + " ."
TEXT = (
    "The 3 quick brown foxes jumped over 12 lazy dogs. Pack my box with 5 dozen liquor jugs. "
    "How vexingly quick daft zebras jump. Sphinx of black quartz judge my vow 7 times. "
) * 4


def windows(step: int, count: int = 8, length: int = 32) -> torch.Tensor:
    ids = torch.tensor([CHARS.index(c) for c in TEXT])
    g = torch.Generator().manual_seed(900 + 17 * step)
    starts = torch.randint(0, len(ids) - length - 1, (count,), generator=g)
    return torch.stack([ids[s : s + length + 1] for s in starts.tolist()])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(5)
    model = TinyLM(len(CHARS))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, model, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            seq = windows(step)
            logits = model(seq[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), seq[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()
