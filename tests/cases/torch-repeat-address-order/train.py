"""A tiny next-token model (embedding tied to the output head, two residual MLP blocks)
trained with SGD and momentum on the CPU, one process.

    python train.py --out DIR --steps 8

The optimizer has two parameter groups (matrices decay, vectors and the embedding do not);
the gradients are clipped by one global norm over a flat buffer (gradclip.py). Each step
logs the exact bits of the loss, of the global gradient norm before clipping and of the
parameters' global norm after the update. The data of step N come from a generator seeded
with N.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from gradclip import clip_flat_, flat_norm, optimizer_params

from triage_agent.metrics import MetricLog

VOCAB, WIDTH, CONTEXT, BATCH = 64, 32, 16, 24


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.randn(CONTEXT, WIDTH) * 0.02)
        self.blocks = nn.Sequential(Block(WIDTH), Block(WIDTH))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)
        self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.pos)))


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim == 2 and "embed" not in name else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    seq = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1), generator=g)
    seq[:, 1::2] = (seq[:, 0:-1:2] * 7 + 3) % VOCAB  # a learnable pattern on odd positions
    return seq[:, :-1], seq[:, 1:]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-norm", type=float, default=0.25)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = TinyLM()
    opt = torch.optim.SGD(param_groups(model, 1e-4), lr=0.5, momentum=0.9)
    params = optimizer_params(opt)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = clip_flat_(params, args.max_norm)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm, param_norm=flat_norm(params))


if __name__ == "__main__":
    main()
