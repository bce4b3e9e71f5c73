"""Self-distillation on a small tabular classifier: an MLP trained with AdamW on the CPU in
one process through the team's trainkit Trainer (found on PYTHONPATH), with a consistency
term towards an EMA copy of its weights on a noisy view of each batch. The EMA copy is
scored on a held-out batch after every step.    python train.py --out DIR [--steps 8]

Step N's data come from a generator seeded with N, the held-out batch from its own, the
weights from the global generator seeded once: a run repeats itself bit for bit.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from trainkit import ModelEMA, Trainer

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 16, 48, 4


def labelled(g: torch.Generator, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(size, FEATURES, generator=g)
    return x, (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5200 + 17 * step)
    x, y = labelled(g, 32)
    return x, x + 0.1 * torch.randn(x.shape, generator=g), y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(41)
    net = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN),
                        nn.GELU(), nn.Linear(HIDDEN, CLASSES))
    ema = ModelEMA(net, decay=0.9)
    opt = torch.optim.AdamW(net.parameters(), lr=5e-3, weight_decay=0.01)
    trainer = Trainer(net, opt, ema, consistency=0.5, temperature=2.0, clip=1.0)
    x_val, y_val = labelled(torch.Generator().manual_seed(99), 64)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            res = trainer.train_step(*batch(step))
            with torch.no_grad():
                val = F.cross_entropy(ema.module(x_val), y_val)
            log.log(step, loss=res["loss"], consistency=res["consistency"],
                    grad_norm=res["grad_norm"], ema_val_loss=val)
            print(f"step {step}: loss {float(res['loss']):.6f} consistency "
                  f"{float(res['consistency']):.6f} ema_val_loss {float(val):.6f}")


if __name__ == "__main__":
    main()
