"""A small pre-norm transformer block stack trained on one CUDA device (plain PyTorch),
eager or under torch.compile.

    python train.py --out DIR --compile 0
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

VOCAB, SEQ, WIDTH = 128, 64, 128


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, 4, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.n1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.n2(x))


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.Sequential(Block(), Block())
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.embed(tokens)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--compile", type=int, choices=[0, 1], default=0)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(3)
    model = LM().cuda()
    step_model = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            g = torch.Generator().manual_seed(step)
            tokens = torch.randint(0, VOCAB, (16, SEQ + 1), generator=g).cuda()
            logits = step_model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())


if __name__ == "__main__":
    main()
