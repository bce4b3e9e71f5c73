"""A tiny next-token model (embedding, two residual MLP blocks, a tied-free head) trained
with AdamW on the CPU, one process.

    python train.py --out DIR --steps 8

Each step logs the exact bits of the loss and of the clipped parameters' global gradient
norm. The data of step N come from a generator seeded with N.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from clipping import clip_by_global_norm, clipped_names

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
        self.blocks = nn.Sequential(Block(WIDTH), Block(WIDTH))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(tokens)))


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
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    names = clipped_names(model, exclude=("embed.weight",))
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = clip_by_global_norm(model, names, args.max_norm)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
