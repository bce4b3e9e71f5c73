"""A spectral-feature regressor trained with AdamW in one process (plain PyTorch, CPU).

    python train.py --out DIR --steps 8 [--fast-math]

Each step draws a batch of noisy wide feature vectors, standardises it with the batch's
global mean and standard deviation, and regresses a smooth target profile. The exact bits
of the loss, the gradient norm and the batch statistics are logged every step.

--fast-math applies the job's start-up speed settings (see ``configure_math``).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, BATCH = 2048, 64, 384


def configure_math(fast: bool) -> None:
    """Start-up speed settings: under --fast-math, let intra-op kernels use two threads."""
    if fast:
        torch.set_num_threads(2)


def make_batch(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7 * step + 2)
    scale = torch.rand(BATCH, 1, generator=g) * 3 + 0.5
    grid = torch.linspace(-1, 1, FEATURES)
    target = torch.exp(-((grid - torch.rand(BATCH, 1, generator=g) + 0.5) ** 2) * 8) * scale
    raw = target + 0.2 * torch.randn(BATCH, FEATURES, generator=g) + 1.5
    mean, std = raw.mean(), raw.std()
    return (raw - mean) / std, target, mean, std


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--fast-math", action="store_true")
    args = p.parse_args()
    configure_math(args.fast_math)
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, FEATURES))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y, mean, std = make_batch(step)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm, batch_mean=mean, batch_std=std)


if __name__ == "__main__":
    main()
