"""A small denoising autoencoder trained with Adam in one process (plain PyTorch, CPU).

    python train.py --out DIR --steps 6

Each step logs the exact bits of the loss, the gradient norm and the learning rate.
"""

import argparse

import torch
import torch.nn as nn

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, BATCH = 1024, 96, 512


def make_data(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A clean signal (a few sinusoids per row) and its noisy copy, standardised per batch."""
    g = torch.Generator().manual_seed(31 * step + 5)
    freq = torch.rand(BATCH, 4, 1, generator=g) * 6
    grid = torch.linspace(0, 1, FEATURES)
    clean = torch.sin(freq * grid * 6.2832).sum(dim=1)
    noisy = clean + 0.1 * torch.randn(BATCH, FEATURES, generator=g)
    return (noisy - noisy.mean()) / noisy.std(), clean


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, FEATURES))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            noisy, clean = make_data(step)
            loss = nn.functional.mse_loss(model(noisy), clean)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            lr = opt.param_groups[0]["lr"]
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm, lr=lr)


if __name__ == "__main__":
    main()
