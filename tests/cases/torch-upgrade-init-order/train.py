"""Entry point of a small tabular classification job: mlpkit's residual MLP classifier
trained from scratch with AdamW on the CPU, in one process.

    python train.py --out DIR --steps 8

The model package, mlpkit, is found on PYTHONPATH. The data of step N come from a
generator seeded with N; the weights from the global torch generator, seeded once at
start-up, so a run repeats itself bit for bit.
"""

import argparse

import mlpkit
import torch
import torch.nn.functional as F
from mlpkit import model

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 24, 5


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1300 + step)
    x = torch.randn(64, FEATURES, generator=g) * 1.5
    y = (x[:, :CLASSES] * torch.linspace(0.5, 1.5, CLASSES)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    net = model.Classifier(FEATURES, CLASSES)
    print(f"mlpkit {mlpkit.__version__}")
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")


if __name__ == "__main__":
    main()
