"""A small residual MLP regressor (model.py) trained with AdamW on the CPU, in one process.

    python train.py --out DIR [--steps 10] [--fp32-norm]

The rows of step N come from a generator seeded with N; the weights from the global torch
generator, seeded once in trainer.prepare, and the model has no dropout, so a run repeats
itself bit for bit. With --fp32-norm the layer norms normalise in float32 whatever the
input's dtype (norms.py); the model here is float32 throughout.
"""

import argparse

import torch
import torch.nn.functional as F
import trainer

from triage_agent.metrics import MetricLog


def batch(step: int, rows: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(700 + step)
    x = torch.randn(rows, trainer.FEATURES, generator=g)
    w = torch.linspace(-1.0, 1.0, trainer.FEATURES * trainer.OUTPUTS).view(trainer.FEATURES, -1)
    y = torch.tanh(x @ w) + 0.1 * x[:, : trainer.OUTPUTS] ** 2
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--fp32-norm", action="store_true", help="normalise in float32")
    args = p.parse_args()
    torch.set_num_threads(1)
    net, opt, sched = trainer.prepare(args)
    net.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.mse_loss(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")


if __name__ == "__main__":
    main()
