"""A character-level GRU language model trained with HandAdam (optim.py), plain PyTorch.

    python train.py --out DIR --param-groups 1

``--param-groups 2`` gives the recurrent body and the output head their own groups (with
the same hyper-parameters, so that their learning rates can be scheduled apart later).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from optim import HandAdam

from triage_agent.metrics import MetricLog

TEXT = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. " * 8
CHARS = sorted(set(TEXT))


class CharGRU(nn.Module):
    def __init__(self, width: int = 48) -> None:
        super().__init__()
        self.embed = nn.Embedding(len(CHARS), width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, len(CHARS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(self.embed(x))[0])


def windows(step: int, count: int = 8, length: int = 24) -> torch.Tensor:
    ids = torch.tensor([CHARS.index(c) for c in TEXT])
    g = torch.Generator().manual_seed(step)
    starts = torch.randint(0, len(ids) - length - 1, (count,), generator=g)
    return torch.stack([ids[s : s + length + 1] for s in starts.tolist()])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--param-groups", type=int, choices=[1, 2], default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = CharGRU()
    if args.param_groups == 1:
        groups = [{"params": model.parameters()}]
    else:
        body = [q for n, q in model.named_parameters() if not n.startswith("head.")]
        groups = [{"params": body}, {"params": model.head.parameters()}]
    opt = HandAdam(groups, lr=3e-3, wd=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            seq = windows(step)
            logits = model(seq[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, len(CHARS)), seq[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())


if __name__ == "__main__":
    main()
