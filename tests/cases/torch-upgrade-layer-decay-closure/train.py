"""Entry point of a small fine-tuning job: a residual MLP classifier trained with SGD and
layer-wise learning-rate decay (tunekit), on the CPU, in one process.

    python train.py --out DIR --steps 8

tunekit is found on PYTHONPATH. The data of step N come from a generator seeded with N;
the weights from the global torch generator, seeded once at start-up, so a run repeats
itself bit for bit.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import tunekit
from tunekit.layerwise import apply_layer_decay
from tunekit.schedule import linear_warmup

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 16, 4


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(F.gelu(self.norm(x)))


class Classifier(nn.Module):
    def __init__(self, width: int = 32, depth: int = 3) -> None:
        super().__init__()
        self.stem = nn.Linear(FEATURES, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, CLASSES)

    def layers(self) -> list[nn.Module]:
        """From the input to the head."""
        return [self.stem, *self.blocks, self.head]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(700 + step)
    x = torch.randn(64, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--layer-decay", type=float, default=0.6)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    net = Classifier()
    print(f"tunekit {tunekit.__version__}")
    apply_layer_decay(net.layers(), args.layer_decay)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    sched = linear_warmup(opt, warmup_steps=3)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")


if __name__ == "__main__":
    main()
