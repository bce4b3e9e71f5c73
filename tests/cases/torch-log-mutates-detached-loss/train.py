"""A small next-token model trained with AdamW on the CPU, on padded batches of sequences of
varying length.

    python train.py --out DIR --steps 8 [--log-every N] [--log-per-token]

The training loss is sentence-averaged: the cross-entropy summed over each sequence's target
tokens, averaged over the batch's sequences. The learning rate warms up linearly and is
damped on a step whose loss jumps above its running average (LossSpikeDamper). Every
--log-every steps a line is printed (meters.py); --log-per-token adds the loss per target
token, in bits, and the perplexity. The data of step N come from a generator seeded with N,
the weights from the global generator seeded once, so a run repeats itself bit for bit.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from meters import StepReporter

from triage_agent.metrics import MetricLog

VOCAB, PAD, MAX_LEN, BATCH = 48, 0, 12, 8
BASE_LR, WARMUP = 4e-3, 3


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Token ids (PAD after each sequence's end) and next-token targets (-100 on padding)."""
    g = torch.Generator().manual_seed(900 + step)
    lengths = torch.randint(4, MAX_LEN + 1, (BATCH,), generator=g)
    tokens = torch.full((BATCH, MAX_LEN + 1), PAD, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        t = torch.randint(1, VOCAB, (1,), generator=g)
        for j in range(n + 1):
            tokens[i, j] = t
            jump = torch.randint(0, 4, (1,), generator=g)
            t = (3 * t + 1 + (jump == 0) * jump.add(5)) % (VOCAB - 1) + 1
    x, y = tokens[:, :-1].clone(), tokens[:, 1:].clone()
    keep = torch.arange(MAX_LEN)[None, :] < lengths[:, None]
    x[~keep] = PAD
    y[~keep] = -100
    return x, y, int(keep.sum())


class LossSpikeDamper:
    """Scales a step's learning rate by min(1, ema / loss), so a batch whose loss jumps above
    the running average of the loss moves the weights less."""

    def __init__(self, beta: float = 0.7) -> None:
        self.beta = beta
        self.ema: float | None = None

    def __call__(self, loss: torch.Tensor) -> float:
        value = loss.item()
        if self.ema is None:
            self.ema = value
        factor = min(1.0, self.ema / value)
        self.ema = self.beta * self.ema + (1.0 - self.beta) * value
        return factor


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--log-every", type=int, default=0, help="print a log line every N steps")
    p.add_argument("--log-per-token", action="store_true",
                   help="add per-token loss, bits and perplexity to the log line")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(31)
    model = nn.Sequential(
        nn.Embedding(VOCAB, 32, padding_idx=PAD), nn.Linear(32, 64), nn.Tanh(),
        nn.Linear(64, VOCAB),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=BASE_LR, weight_decay=0.01)
    damper = LossSpikeDamper()
    report = StepReporter(args.log_every, args.log_per_token)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y, n_tokens = batch(step)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1),
                                   ignore_index=-100, reduction="sum") / x.shape[0]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            report(step, loss, norm, n_tokens, x.shape[0])
            lr = BASE_LR * min(1.0, (step + 1) / WARMUP) * damper(loss)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm, lr=lr)


if __name__ == "__main__":
    main()
