"""A small residual CNN trained on one CUDA device (plain PyTorch), fp32 with TF32 off.

    python train.py --out DIR --cudnn-benchmark 0

``--cudnn-benchmark 1`` lets cuDNN time its convolution algorithms on the first call of
each shape and keep the fastest.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


class ResBlock(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.c2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.n = nn.BatchNorm2d(ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.c2(F.relu(self.n(self.c1(x)))))


def images(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234 + step)
    return torch.randn(64, 3, 32, 32, generator=g), torch.randint(0, 10, (64,), generator=g)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--cudnn-benchmark", type=int, choices=[0, 1], default=0)
    args = p.parse_args()
    torch.backends.cudnn.benchmark = bool(args.cudnn_benchmark)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(5)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1),
        ResBlock(64),
        ResBlock(64),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = (t.cuda() for t in images(step))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())


if __name__ == "__main__":
    main()
