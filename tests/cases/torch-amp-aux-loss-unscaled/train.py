"""A small mixture-of-experts classifier trained in float16 autocast on the CPU with
torch.amp's GradScaler and AdamW, a load-balancing loss and a router z-loss beside the task
loss, gradients clipped to a global norm of 1.0.

    python train.py --out DIR [--steps 8] [--step-impl v1|v2]

The data of step N come from a generator seeded with N and the weights from the global
generator, seeded once at start-up, so a run repeats itself bit for bit. --step-impl picks
the training-step function (trainer.py).
"""

import argparse

import torch
import trainer
from model import MoEClassifier

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, HIDDEN, EXPERTS, CLASSES, BATCH = 24, 32, 32, 4, 6, 64


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7919 + 17 * step)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--step-impl", choices=("v1", "v2"), default="v1")
    p.add_argument("--balance-coef", type=float, default=0.01)
    p.add_argument("--z-coef", type=float, default=0.001)
    p.add_argument("--max-norm", type=float, default=1.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(31)
    model = MoEClassifier(FEATURES, WIDTH, HIDDEN, EXPERTS, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**14, enabled=True)
    step_fn = trainer.train_step_v2 if args.step_impl == "v2" else trainer.train_step
    coefs = {"balance": args.balance_coef, "router_z": args.z_coef}
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            stats = step_fn(
                model,
                opt,
                scaler,
                x,
                y,
                aux_coefs=coefs,
                max_norm=args.max_norm,
                dtype=torch.float16,
            )
            log.log(
                step, loss=stats["loss"], task_loss=stats["task_loss"], grad_norm=stats["grad_norm"]
            )
            print(
                f"step {step}: loss {float(stats['loss']):.7f} "
                f"task {float(stats['task_loss']):.7f} "
                f"grad_norm {float(stats['grad_norm']):.7f} scale {scaler.get_scale():g}"
            )


if __name__ == "__main__":
    main()
