"""A normalised radial-basis-function regressor trained with Adam on the CPU.

    python train.py --out DIR --steps 10 [--profile-mem]

An encoder maps each input to a 16-dimensional code; the head weighs the code against 48
learned centres with a sharp Gaussian kernel, normalises the weights over the centres and
reads the target out of them. The data of step N come from a generator seeded with N, the
weights from the global generator seeded once, so a run repeats itself bit for bit.
With --profile-mem the job reports each module's activation memory and time, and the
peak resident set size, at the end (memprof.py).
"""

import argparse

import memprof
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CODE, CENTRES, TARGETS = 8, 16, 48, 4
BANDWIDTH = 0.3


class NormalisedRBF(nn.Module):
    """Kernel weights of each code to every centre, divided by their sum over the centres."""

    def __init__(self, dim: int, centres: int, bandwidth: float) -> None:
        super().__init__()
        self.centres = nn.Parameter(torch.randn(centres, dim))
        self.bandwidth = bandwidth

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        d2 = torch.cdist(z, self.centres).pow(2)
        k = torch.exp(-d2 / (2 * self.bandwidth**2))
        return k / (k.sum(dim=1, keepdim=True) + torch.finfo(k.dtype).tiny)


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(FEATURES, CODE), nn.Tanh())
        self.rbf = NormalisedRBF(CODE, CENTRES, BANDWIDTH)
        self.readout = nn.Linear(CENTRES, TARGETS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.rbf(2.0 * self.encoder(x)))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(128, FEATURES, generator=g)
    y = torch.sin(x[:, :TARGETS] * 1.5) + 0.5 * x[:, TARGETS:].tanh()
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--profile-mem", action="store_true", help="report activation memory")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = Regressor()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    prof = memprof.attach(model) if args.profile_mem else None
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if prof is not None:
                prof.end_step(step)
    if prof is not None:
        print(prof.report())


if __name__ == "__main__":
    main()
