"""A small GRU next-token model trained with Adam on the CPU, three micro-batches per step.

    python train.py --out DIR --loss-reduction per-micro-mean

``--loss-reduction`` says how the token losses of a step's micro-batches become the loss
each micro-batch backpropagates: the mean over each micro-batch's tokens, divided by the
number of micro-batches (``per-micro-mean``), or each micro-batch's token sum divided by
the number of tokens in the whole step (``step-token-mean``). Every micro-batch holds the
same number of tokens, so both are the step's mean token loss.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

MICRO, VOCAB = 3, 24


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


def micro_batch(step: int, micro: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * step + micro)
    start = torch.randint(0, VOCAB, (5, 1), generator=g)
    walk = torch.randint(1, 3, (5, 11), generator=g)
    return torch.cat([start, start + walk.cumsum(1)], 1) % VOCAB


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--loss-reduction", choices=["per-micro-mean", "step-token-mean"])
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            batches = [micro_batch(step, m) for m in range(MICRO)]
            step_tokens = sum(b[:, 1:].numel() for b in batches)
            opt.zero_grad()
            total = torch.zeros(())
            for tokens in batches:
                logits = model(tokens[:, :-1])
                per_token = F.cross_entropy(
                    logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1), reduction="none"
                )
                if args.loss_reduction == "per-micro-mean":
                    loss = per_token.mean() / MICRO
                else:
                    loss = per_token.sum() / step_tokens
                loss.backward()
                total += loss.detach()
            opt.step()
            log.log(step, loss=total)


if __name__ == "__main__":
    main()
