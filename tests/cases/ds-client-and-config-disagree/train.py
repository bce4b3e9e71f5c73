"""A small fp32 MLP classifier trained by DeepSpeed ZeRO stage 2 on two CPU ranks (gloo),
AdamW and gradient clipping from one DeepSpeed JSON config, two micro-batches of 8 per rank
accumulated into each optimizer step.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps 6
        [--grad-accum N]

--grad-accum N sets the micro-batches per optimizer step for the job and overrides the
config's gradient_accumulation_steps; without it the config's value is used. The training
loop is in trainer.py. Each rank reads its own shard of a synthetic stream (a generator
seeded per step, micro-batch and rank). Each optimizer step logs the exact bits of the mean
loss, the gradient norm and the weight norm.
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
from trainer import Trainer

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 10, 32, 4


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
        nn.Linear(HIDDEN, CLASSES),
    )


def micro_batch(step: int, micro: int, rank: int, size: int):
    g = torch.Generator().manual_seed(6100 + 41 * step + 5 * micro + rank)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.4 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--grad-accum", type=int, default=None)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    if args.grad_accum is not None:
        config["gradient_accumulation_steps"] = args.grad_accum
    torch.manual_seed(17)
    model = make_model()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    trainer = Trainer(engine, grad_accum=args.grad_accum or 1)
    micro, gas = engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps()
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        loss = trainer.train_step(micro_batch(step, m, rank, micro) for m in range(gas))
        with torch.no_grad():
            weight_norm = torch.stack([q.norm() for q in engine.module.parameters()]).norm()
        log.log(step, loss=loss, grad_norm=engine.get_global_grad_norm(), weight_norm=weight_norm)
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
