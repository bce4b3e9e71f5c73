"""A small fp32 MLP regressor trained by DeepSpeed ZeRO stage 2 on two CPU ranks (gloo),
AdamW, every engine setting read from one DeepSpeed JSON config.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps 8
        [--check-grads]

Each rank reads its own shard of a synthetic regression stream (a generator seeded per step
and rank). With --check-grads the first rank prints per-parameter gradient statistics after
every step (gradcheck.py), taken from its own gradients before they are reduced. Each
optimizer step logs the exact bits of the loss, the gradient norm and the weight norm.
"""

import argparse
import json
import sys

import deepspeed
import gradcheck
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, TARGETS, BATCH = 16, 32, 4, 16


def shard_batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7300 + 41 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    w = torch.linspace(-1.0, 0.9, FEATURES * TARGETS).view(FEATURES, TARGETS)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(BATCH, TARGETS, generator=g)
    return x, y


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument(
        "--check-grads", action="store_true", help="print rank 0's gradient statistics each step"
    )
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(23)
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, TARGETS),
    )
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    checker = None
    if args.check_grads and rank == 0:
        checker = gradcheck.GradientChecker(engine.module)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        x, y = shard_batch(step, rank)
        loss = F.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        with torch.no_grad():
            weight_norm = torch.stack([q.norm() for q in engine.module.parameters()]).norm()
        log.log(
            step,
            loss=loss.detach(),
            grad_norm=engine.get_global_grad_norm(),
            weight_norm=weight_norm,
        )
        if checker is not None:
            checker.report(step)
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
