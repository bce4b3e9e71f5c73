"""Train TinyLM (lm.py) on a fixed text with AdamW, one CPU process.

    python train.py --out DIR --tensor-parallel 1

``--tensor-parallel`` is the layout the job is declared for; here it only sizes the
vocabulary table the way the tensor-parallel launcher does (layout.py), so that the two
launchers' checkpoints are interchangeable.
"""

import argparse
import string

import torch
import torch.nn.functional as F
from layout import padded_vocab_size
from lm import TinyLM

from triage_agent.metrics import MetricLog

CHARS = string.ascii_lowercase + string.ascii_uppercase + string.digits + " ."
TEXT = (
    "The 3 quick brown foxes jumped over 12 lazy dogs. Pack my box with 5 dozen liquor jugs. "
    "How vexingly quick daft zebras jump. Sphinx of black quartz judge my vow 7 times. "
) * 4


def windows(step: int, count: int = 8, length: int = 32) -> torch.Tensor:
    ids = torch.tensor([CHARS.index(c) for c in TEXT])
    g = torch.Generator().manual_seed(500 + step)
    starts = torch.randint(0, len(ids) - length - 1, (count,), generator=g)
    return torch.stack([ids[s : s + length + 1] for s in starts.tolist()])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tensor-parallel", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = TinyLM(len(CHARS), padded_vocab_size(len(CHARS), args.tensor_parallel))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            seq = windows(step)
            logits = model(seq[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), seq[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.get_total_norm([q.grad for q in model.parameters()])
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
