"""Entry point of a small tabular classification job: an MLP trained from scratch with
SGD and momentum on the CPU, in one process, through the team's stepkit Trainer, which
clips the gradients to a total norm of 0.25 (python train.py --out DIR --steps 8).

stepkit is found on PYTHONPATH. The data of step N come from a generator seeded with N,
the weights from the global generator seeded once, so a run repeats itself bit for bit.
"""

import argparse

import stepkit
import torch
import torch.nn as nn
import torch.nn.functional as F
from stepkit import Trainer

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def batch(step: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5100 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] + 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def weight_norm(net: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return torch.linalg.vector_norm(torch.stack([p.norm() for p in net.parameters()]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--max-grad-norm", type=float, default=0.25)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    net = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.SGD(net.parameters(), lr=1.0, momentum=0.9)
    trainer = Trainer(net, opt, max_grad_norm=args.max_grad_norm)
    print(f"stepkit {stepkit.__version__}")
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(net(x), y)
            grad_norm = trainer.train_step(loss)
            wnorm = weight_norm(net)
            log.log(step, loss=loss.detach(), grad_norm=grad_norm, weight_norm=wnorm)
            print(
                f"step {step}: loss {loss.item():.6f} grad_norm {grad_norm.item():.6f}"
                f" weight_norm {wnorm.item():.6f}"
            )


if __name__ == "__main__":
    main()
