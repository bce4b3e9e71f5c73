"""A conditioned regressor (model.py) trained with AdamW on the CPU, with dropout.

    python train.py --out DIR --steps-to 9 [--save CKPT] [--resume CKPT]

The data of step N (features, conditioning vector, target) come from a generator seeded
with N; the global generator draws the initial weights and then only the dropout masks, and
its state is saved with the checkpoint (ckpt.py).
"""

import argparse

import ckpt
import torch
import torch.nn.functional as F
from model import COND, FEATURES, ConditionedNet

from triage_agent.metrics import MetricLog


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(6301 + 29 * step)
    x = torch.randn(48, FEATURES, generator=g)
    c = torch.randn(48, COND, generator=g)
    y = torch.tanh(x[:, :4].sum(1, keepdim=True) * 0.5) * (1.0 + 0.3 * c[:, :1]) + 0.2 * c[:, 1:2]
    return x, c, y + 0.05 * torch.randn(48, 1, generator=g)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9)
    p.add_argument("--save")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(31)
    model = ConditionedNet()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    model.train()
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.load_state(args.resume, model, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, c, y = batch(step)
            loss = F.mse_loss(model(x, c), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save_state(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()
