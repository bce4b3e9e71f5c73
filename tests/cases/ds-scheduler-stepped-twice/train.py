"""A bf16 bag-of-tokens classifier trained by DeepSpeed ZeRO stage 2 on two CPU ranks
(gloo), with a torch AdamW and a warm-up-then-cosine LambdaLR schedule, both handed to
deepspeed.initialize.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2_bf16.json --out DIR --steps 8
    deepspeed --num_gpus 2 train.py --deepspeed_config zero2_bf16.json --out DIR --epochs 2

Training length is given in optimizer steps (--steps) or in passes over the corpus
(--epochs); the corpus (data.py) is 4 steps an epoch at two ranks, and the step loop reads
it in the same epoch order. The loops are in trainloop.py.
"""

import argparse
import json
import math
import sys

import deepspeed
import torch
import torch.nn as nn
import trainloop
from data import CLASSES, VOCAB, ShardedCorpus

from triage_agent.metrics import MetricLog

WARMUP, TOTAL = 3, 8


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.head = nn.Sequential(nn.Linear(32, 48), nn.GELU(), nn.Linear(48, CLASSES))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens).mean(dim=1))


def warmup_cosine(i: int) -> float:
    if i < WARMUP:
        return (i + 1) / WARMUP
    t = min(1.0, (i - WARMUP) / (TOTAL - WARMUP))
    return 0.1 + 0.45 * (1.0 + math.cos(math.pi * t))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    length = p.add_mutually_exclusive_group(required=True)
    length.add_argument("--steps", type=int, help="train this many optimizer steps")
    length.add_argument("--epochs", type=int, help="train this many passes over the corpus")
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(5)
    model = BagClassifier()
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine)
    engine, _, _, sched = deepspeed.initialize(
        model=model, optimizer=opt, lr_scheduler=sched, config=config
    )
    corpus = ShardedCorpus(rank, world)
    log = MetricLog(args.out, rank=rank)
    if args.epochs:
        trainloop.fit_epochs(engine, sched, corpus, args.epochs, log)
    else:
        trainloop.fit_steps(engine, sched, corpus, args.steps, log)
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
