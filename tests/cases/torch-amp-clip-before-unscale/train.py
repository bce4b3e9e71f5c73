"""A small MLP classifier trained in float16 autocast on the CPU with torch.amp's GradScaler,
SGD with momentum, and gradients clipped to a global norm of 0.25.

    python train.py --out DIR [--steps 8] [--step-impl v1|v2] [--micro-batches N]

The data of step N come from a generator seeded with N and the weights from the global
generator, seeded once at start-up, so a run repeats itself bit for bit. --step-impl picks
the training-step function (trainer.py); --micro-batches splits each batch for the v2 step,
which accumulates their gradients before one update.
"""

import argparse

import torch
import torch.nn as nn
import trainer

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, BATCH = 24, 64, 6, 64


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4099 + 31 * step)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.4 * x[:, CLASSES : 2 * CLASSES].flip(1)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--step-impl", choices=("v1", "v2"), default="v1")
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--max-norm", type=float, default=0.25)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = nn.Sequential(
        nn.Linear(FEATURES, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
        nn.Linear(WIDTH, CLASSES),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12, growth_interval=3)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            if args.step_impl == "v2":
                micro = list(zip(x.chunk(args.micro_batches), y.chunk(args.micro_batches), strict=True))
                stats = trainer.train_step_v2(
                    model, opt, scaler, micro, max_norm=args.max_norm, dtype=torch.float16
                )
            else:
                stats = trainer.train_step(
                    model, opt, scaler, x, y, max_norm=args.max_norm, dtype=torch.float16
                )
            log.log(step, **stats)
            print(f"step {step}: loss {float(stats['loss']):.6f} "
                  f"grad_norm {float(stats['grad_norm']):.6f} scale {scaler.get_scale():g}")


if __name__ == "__main__":
    main()
