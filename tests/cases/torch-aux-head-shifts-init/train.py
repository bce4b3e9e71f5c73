"""A small tabular classifier (network.py) trained with AdamW on the CPU, in one process.

    python train.py --out DIR [--steps 8] [--linear-probe]

The rows of step N come from a generator seeded with N; the weights from the global torch
generator, seeded once at start-up, and the model has no dropout, so a run repeats itself
bit for bit. With --linear-probe, a linear probe is fitted on the trained classifier's
detached features after the last step and its accuracy on an auxiliary attribute of the
rows is printed; training itself is the same job.
"""

import argparse

import network
import torch
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CLASSES, ATTRIBUTES = 24, 5, 3


def batch(step: int, rows: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5200 + step)
    x = torch.randn(rows, FEATURES, generator=g) * 1.5
    y = (x[:, :CLASSES] * torch.linspace(0.5, 1.5, CLASSES)).argmax(dim=1)
    attr = (x[:, CLASSES : CLASSES + ATTRIBUTES] - 0.3 * x[:, :ATTRIBUTES]).argmax(dim=1)
    return x, y, attr


def fit_probe(net: network.Classifier, probe: network.ProbeHead, steps: int = 20) -> float:
    """Fit the probe on the frozen classifier's features; its accuracy on held-out rows."""
    opt = torch.optim.SGD(probe.parameters(), lr=0.1, momentum=0.9)
    for i in range(steps):
        x, _, attr = batch(1000 + i)
        with torch.no_grad():
            feats = net.features(x)
        loss = F.cross_entropy(probe(feats.detach()), attr)
        opt.zero_grad()
        loss.backward()
        opt.step()
    x, _, attr = batch(2000, rows=256)
    with torch.no_grad():
        return (probe(net.features(x)).argmax(dim=1) == attr).float().mean().item()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument(
        "--linear-probe", action="store_true", help="fit a probe on the features after training"
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(31)
    net, probe = network.create_model(
        FEATURES, CLASSES, probe_targets=ATTRIBUTES if args.linear_probe else 0
    )
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.01)
    net.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y, _ = batch(step)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")
    if probe is not None:
        net.eval()
        print(f"linear probe accuracy: {fit_probe(net, probe):.3f}")


if __name__ == "__main__":
    main()
