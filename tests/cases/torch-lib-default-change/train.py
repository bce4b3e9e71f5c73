"""A small residual MLP classifier (model.py, built from the tinylayers library) trained
with AdamW on the CPU.

    python train.py --out DIR --steps 10

tinylayers is found on PYTHONPATH. The data of step N come from a generator seeded with
N; the weights from the global torch generator, seeded once at start-up, so a run repeats
itself bit for bit.
"""

import argparse

import model
import tinylayers
import torch
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 20, 5


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    x = torch.randn(64, FEATURES, generator=g) * 2.0
    y = (x[:, :CLASSES] * torch.linspace(0.5, 1.5, CLASSES)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    net = model.Classifier(FEATURES, CLASSES)
    print(f"tinylayers {tinylayers.__version__}")
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
