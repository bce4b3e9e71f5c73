"""A one-layer self-attention classifier over token sequences, trained with SGD on the CPU
with one intra-op thread.

    python train.py --out DIR --steps 5
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


class Attend(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(1, 2) / 8.0, dim=-1)
        h = self.norm(h + torch.tanh(att @ v))
        return self.head(h.mean(1))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(31 + step)
    tokens = torch.randint(0, 50, (16, 40), generator=g)
    return tokens, tokens[:, 0] % 4


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = Attend()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            tokens, label = batch(step)
            loss = F.cross_entropy(model(tokens), label)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
