"""A small residual MLP classifier trained with AdamW on the CPU (plain PyTorch).

    python train.py --out DIR [--steps 10] [--bf16-head]

Each step draws a batch from a generator seeded with the step, runs it through an input
projection, three pre-norm residual blocks and a classification head, and logs the loss and
the gradient norm. ``--bf16-head`` runs the head in mixed precision (bfloat16 autocast on
the CPU), the way the larger configurations of this job run their output layer; the loss is
always taken in float32.
"""

import argparse
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, HIDDEN, CLASSES, BATCH = 20, 64, 128, 10, 48


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, HIDDEN)
        self.down = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.out = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.proj(self.norm(x))))


class Classifier(nn.Module):
    def __init__(self, bf16_head: bool = False) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = Head()
        self.bf16_head = bf16_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        region = (
            torch.autocast("cpu", dtype=torch.bfloat16)
            if self.bf16_head
            else contextlib.nullcontext()
        )
        with region:
            logits = self.head(h)
        return logits.float()


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES].roll(1, dims=1)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--bf16-head", action="store_true", help="run the head under bf16 autocast")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    model = Classifier(bf16_head=args.bf16_head)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
