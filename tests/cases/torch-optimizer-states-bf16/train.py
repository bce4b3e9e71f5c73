"""A small residual MLP regressor trained with the vendored AdamW (optim.py), plain PyTorch.

    python train.py --out DIR [--steps 6] [--low-mem-optim]

Each step draws a batch from a generator seeded with the step and logs the loss and the
gradient norm. ``--low-mem-optim`` keeps the optimizer's moments in bfloat16, the memory
setting the larger configurations of this job launch with.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from optim import AdamW

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, BATCH = 16, 64, 32


class Regressor(nn.Module):
    def __init__(self, depth: int = 3) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU())
            for _ in range(depth)
        )
        self.out = nn.Linear(WIDTH, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h).squeeze(-1)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4100 + step)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = torch.sin(x[:, :4].sum(dim=1)) + 0.3 * x[:, 4:8].pow(2).mean(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--low-mem-optim", action="store_true", help="bfloat16 optimizer moments")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = Regressor()
    opt = AdamW(
        model.parameters(),
        lr=args.lr,
        weight_decay=0.01,
        state_dtype=torch.bfloat16 if args.low_mem_optim else torch.float32,
    )
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
