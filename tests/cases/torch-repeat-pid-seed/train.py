"""A tiny masked-token denoiser (embedding, two residual MLP blocks, an output head)
trained with AdamW on the CPU, one process.

    python train.py --out DIR --steps 10 --seed 1234

Every step masks a batch of token sequences (masking.py) and trains the model to restore
the masked positions. Each step logs the exact bits of the loss and of the global gradient
norm. Parameters are initialised from the configured seed; the data of step N come from a
generator seeded with the seed and N.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from masking import mask_stream, mask_tokens

from triage_agent.metrics import MetricLog

VOCAB, WIDTH, CONTEXT, BATCH = 48, 32, 16, 24


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.randn(CONTEXT, WIDTH) * 0.02)
        self.blocks = nn.Sequential(Block(WIDTH), Block(WIDTH))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(tokens) + self.pos))


def batch(seed: int, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1000 + step)
    seq = torch.randint(1, VOCAB, (BATCH, CONTEXT), generator=g)
    seq[:, 1::2] = (seq[:, 0::2] * 5 + 1) % (VOCAB - 1) + 1  # a learnable pattern
    return seq


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--mask-prob", type=float, default=0.15)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = Denoiser()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    gen = mask_stream(args.seed)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            tokens = batch(args.seed, step)
            inputs, chosen = mask_tokens(tokens, gen, args.mask_prob, VOCAB)
            logits = model(inputs)
            loss = F.cross_entropy(logits[chosen], tokens[chosen])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
