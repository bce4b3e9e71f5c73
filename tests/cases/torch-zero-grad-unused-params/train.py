"""A two-task classifier (model.py) trained with AdamW on the CPU, one task per step.

    python train.py --out DIR [--steps 10] [--keep-grad-buffers]

Tasks take turns: step N trains the task ``N % 2`` on a batch drawn from a generator seeded
with N; the global torch generator only draws the initial weights, and nothing has dropout.
``--keep-grad-buffers`` is the training step's gradient-storage option (trainer.py).
"""

import argparse

import torch
import torch.nn.functional as F
import trainer
from model import TASKS, MultiTaskNet

from triage_agent.metrics import MetricLog

FEATURES = 24


def batch(step: int, task: str, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5200 + step)
    classes = TASKS[task]
    x = torch.randn(size, FEATURES, generator=g)
    offset = 0 if task == "intent" else 8
    y = (x[:, offset : offset + classes] + 0.3 * x[:, 16 : 16 + classes]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--keep-grad-buffers", action="store_true", help="zero .grad in place")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = MultiTaskNet(FEATURES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    order = list(TASKS)
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            task = order[step % len(order)]
            x, y = batch(step, task)
            loss = F.cross_entropy(model(x, task), y)
            norm = trainer.train_step(model, opt, loss, keep_grad_buffers=args.keep_grad_buffers)
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
