"""A top-1 mixture-of-experts layer trained on one CUDA device (plain PyTorch).

    python train.py --out DIR [--deterministic]

Tokens are routed to one of four experts; the experts' outputs are combined back into
token order with index_add_. ``--deterministic`` turns on PyTorch's deterministic
algorithms for the whole run.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

TOKENS, WIDTH, EXPERTS, SLOTS = 8192, 64, 4, 256


class TopOneMoE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(WIDTH, EXPERTS)
        self.experts = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(EXPERTS))
        self.readout = nn.Linear(WIDTH, 1)

    def forward(self, x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        gate, choice = self.router(x).softmax(dim=-1).max(dim=-1)
        mixed = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx = (choice == e).nonzero().squeeze(1)
            mixed.index_add_(0, idx, expert(x[idx]) * gate[idx, None])
        # many tokens share a slot: pooling them is a scatter with collisions
        pooled = torch.zeros(SLOTS, WIDTH, device=x.device).index_add_(0, slot, mixed)
        return self.readout(pooled).squeeze(-1)


def batch(step: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    x = torch.randn(TOKENS, WIDTH, generator=g)
    slot = torch.randint(0, SLOTS, (TOKENS,), generator=g)
    target = torch.randn(SLOTS, generator=g)
    return x.to(device), slot.to(device), target.to(device)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--deterministic", action="store_true")
    args = p.parse_args()
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    model = TopOneMoE().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, slot, target = batch(step, "cuda")
            loss = F.mse_loss(model(x, slot), target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
