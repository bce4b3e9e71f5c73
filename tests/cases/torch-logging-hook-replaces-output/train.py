"""A small MLP classifier trained with AdamW on the CPU.

    python train.py --out DIR [--steps 8] [--activation-stats-every N]

The data of step N come from a generator seeded with N; the global torch generator only
draws the initial weights, and the model has no dropout, so a run repeats itself bit for
bit. With --activation-stats-every N, statistics of the hidden layers' outputs are printed
every N-th step (actstats.py).
"""

import argparse

import actstats
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 24, 64, 5


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = HIDDEN
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc1(x))
        h = h + F.gelu(self.fc2(h))
        h = h + F.gelu(self.fc3(h))
        return self.head(h)


def batch(step: int, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    x = 1.5 * torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--activation-stats-every", type=int, default=0,
                   help="print statistics of the hidden activations every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = MLP()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    stats = actstats.ActivationStats(model, args.activation_stats_every)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            stats.begin(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            stats.report(step)


if __name__ == "__main__":
    main()
