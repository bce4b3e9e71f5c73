"""Fine-tuning of a small bag-of-tokens text classifier with DeepSpeed ZeRO stage 2 on two
CPU ranks (gloo), AdamW, every engine setting read from one DeepSpeed JSON config.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps 8

The classifier's weights come from the seeded global generator (standing in for the
pretrained checkpoint); the job's fine-tuning package (finetune, found on PYTHONPATH) warms
the head up with the embedding frozen, then fine-tunes the whole model through the engine.
Each rank reads its own shard of a synthetic stream (a generator seeded per step and rank).
Each optimizer step logs the exact bits of the loss, the gradient norm, the embedding's norm
and the weight norm.
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F
from finetune import setup

from triage_agent.metrics import MetricLog

VOCAB, DIM, HIDDEN, CLASSES, TOKENS = 48, 16, 32, 4, 12


class TextClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.head = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, CLASSES))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens).mean(dim=1))


def batch(seed: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (rows, TOKENS), generator=g)
    labels = (tokens % CLASSES).sum(dim=1) % CLASSES
    return tokens, labels


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(31)
    model = TextClassifier()
    # the same calibration rows on every rank, so the warmed-up weights agree across ranks
    engine = setup.build_engine(model, config, calibration=batch(5000, 32))
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        tokens, labels = batch(6100 + 37 * step + rank, config["train_micro_batch_size_per_gpu"])
        loss = F.cross_entropy(engine(tokens), labels)
        engine.backward(loss)
        engine.step()
        with torch.no_grad():
            weight_norm = torch.stack([q.norm() for q in engine.module.parameters()]).norm()
        log.log(
            step,
            loss=loss.detach(),
            grad_norm=engine.get_global_grad_norm(),
            embed_norm=engine.module.embed.weight.detach().norm(),
            weight_norm=weight_norm,
        )
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
