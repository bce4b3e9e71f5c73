"""A small token-sequence classifier (embedding, a residual 1-D convolution, mean pooling, a
LayerNorm and a linear head) trained with AdamW on the CPU: four micro-batches of 8 sequences
accumulated per optimizer step, gradients clipped to a global norm of 1.0.

    python train.py --out DIR [--steps 8] [--accum 4] [--step-impl eager|fused]

Step k's micro-batches come from a generator seeded with 9100 + k; the weights from the global
generator, seeded once at start-up, so a run repeats itself bit for bit. --step-impl picks the
training-step implementation (training/steps.py).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from training.steps import STEP_IMPLS

from triage_agent.metrics import MetricLog

VOCAB, SEQ, WIDTH, CLASSES, MICRO = 40, 12, 32, 4, 8


class SeqClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.conv = nn.Conv1d(WIDTH, WIDTH, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        h = h + F.gelu(self.conv(h.transpose(1, 2))).transpose(1, 2)
        return self.head(self.norm(h.mean(dim=1)))


def step_batches(step: int, accum: int, seed: int = 9100):
    g = torch.Generator().manual_seed(seed + step)
    for _ in range(accum):
        x = torch.randint(0, VOCAB, (MICRO, SEQ), generator=g)
        y = ((x < 10).sum(dim=1) + (x[:, 0] > 30).long()) % CLASSES
        yield x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--step-impl", choices=sorted(STEP_IMPLS), default="eager")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(31)
    model = SeqClassifier()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    step_fn = STEP_IMPLS[args.step_impl](model, opt, accum=args.accum, max_norm=1.0)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            stats = step_fn.train_batch(step_batches(step, args.accum))
            log.log(step, **stats)
            print(f"step {step}: loss {float(stats['loss']):.6f} "
                  f"grad_norm {float(stats['grad_norm']):.6f}")


if __name__ == "__main__":
    main()
