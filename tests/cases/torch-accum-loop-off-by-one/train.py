"""A small MLP classifier trained with AdamW on the CPU, four micro-batches of 8 accumulated
per optimizer step, gradients clipped to a global norm of 1.0.

    python train.py --out DIR [--steps 6] [--accum 4] [--trainer v1|v2]

The micro-batches come from one endless stream, the i-th drawn from a generator seeded with
i; the trainer pulls from it what each optimizer step needs. The weights come from the global
generator, seeded once at start-up, so a run repeats itself bit for bit. --trainer picks the
revision of the job's trainer module (trainers/).
"""

import argparse
import importlib

import torch
import torch.nn as nn

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, MICRO = 16, 48, 5, 8


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.block = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        return self.head(h + self.block(h))


def micro_batches(seed: int = 7000):
    i = 0
    while True:
        g = torch.Generator().manual_seed(seed + i)
        x = torch.randn(MICRO, FEATURES, generator=g)
        y = ((x[:, 0] > 0).long() + 2 * (x[:, 1] * x[:, 2] > 0).long() + (x[:, 3] > 1).long())
        yield x, y % CLASSES
        i += 1


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--trainer", choices=("v1", "v2"), default="v1")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    trainers = importlib.import_module(f"trainers.{args.trainer}")
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    trainer = trainers.Trainer(model, opt, accum=args.accum, max_norm=1.0)
    stream = micro_batches()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            stats = trainer.fit_batch(stream)
            log.log(step, **stats)
            print(f"step {step}: loss {float(stats['loss']):.6f} "
                  f"grad_norm {float(stats['grad_norm']):.6f}")


if __name__ == "__main__":
    main()
