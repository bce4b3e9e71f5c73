"""A small MLP classifier (a backbone and a linear head) trained with AdamW on the CPU.

    python train.py --out DIR [--steps 10] [--probe-every N]

The data of step N come from a generator seeded with N, the probe set from one seeded
once; the global torch generator only draws the initial weights, and the model has no
dropout. With --probe-every N a linear probe is fitted on the backbone's features after
every N-th step (diagnostics.py) and its accuracy printed.
"""

import argparse

import diagnostics
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 20, 64, 4


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh()
        )
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def _rows(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def batch(step: int, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(size, torch.Generator().manual_seed(300 + step))


def probe_set(size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    return _rows(size, torch.Generator().manual_seed(41))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--probe-every", type=int, default=0, help="fit a linear probe every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    px, py = probe_set()
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if args.probe_every and (step + 1) % args.probe_every == 0:
                acc = diagnostics.fit_probe(model.backbone, px, py, CLASSES)
                print(f"step {step}: linear probe accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
