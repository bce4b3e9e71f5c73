"""A small residual MLP classifier with an activation penalty, trained with AdamW on the CPU.

    python train.py --out DIR [--steps 8] [--low-memory]

The loss is the cross-entropy plus a small penalty on every block's pre-activations
(layers.py). ``--low-memory`` turns on the blocks' memory-saving activation: the same model,
data and optimizer, the activation written over the pre-activation's buffer.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from layers import Tower

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 16, 5
PENALTY = 0.05


class Classifier(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 64, depth: int = 3, low_memory=False):
        super().__init__()
        self.inp = nn.Linear(FEATURES, width)
        self.tower = Tower(width, hidden, depth, low_memory=low_memory)
        self.out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.tower(self.inp(x)))


def batch(step: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--low-memory", action="store_true", help="memory-saving activations")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = Classifier(low_memory=args.low_memory)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            logits = model(x)
            ce = F.cross_entropy(logits, y)
            loss = ce + PENALTY * model.tower.penalty()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), ce=ce.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
