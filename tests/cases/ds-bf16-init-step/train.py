"""A small bf16 MLP language model trained with DeepSpeed on one CPU rank (gloo).

    deepspeed --num_gpus 1 train.py --deepspeed_config zero1.json --out DIR --steps 6

The DeepSpeed config file picks the ZeRO stage; everything else (model, data, AdamW
hyper-parameters, seed) is the same for every config. Each optimizer step logs the exact
bits of the loss and the learning rate.
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

VOCAB, CONTEXT, WIDTH = 48, 8, 64


class BagOfTokensLM(nn.Module):
    """Predicts the next token from an embedding of the previous CONTEXT tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.mix = nn.Linear(CONTEXT * WIDTH, WIDTH)
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ctx: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = self.embed(ctx).flatten(1)
        logits = self.head(self.norm(F.silu(self.mix(h))))
        return F.cross_entropy(logits.float(), target)


def batch(step: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    rows = torch.randint(0, VOCAB, (size, CONTEXT + 1), generator=g)
    rows[:, -1] = (rows[:, :-1].sum(1) * 7) % VOCAB  # a learnable rule
    return rows[:, :-1], rows[:, -1]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(7)
    model = BagOfTokensLM()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    log = MetricLog(args.out, rank=torch.distributed.get_rank())
    for step in range(args.steps):
        ctx, target = batch(step)
        lr = float(engine.get_lr()[0])
        loss = engine(ctx, target)
        engine.backward(loss)
        engine.step()
        log.log(step, loss=loss.detach(), lr=lr)
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
