"""A small fp32 MLP regressor trained by DeepSpeed ZeRO stage 2 on two CPU ranks (gloo),
AdamW, gradient clipping at 1.0.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps-to 7
    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps-to 3 --save CK
    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps-to 7 --load CK

Checkpoints are DeepSpeed's own (ckpt.py); the step a checkpoint was taken after travels in
its client state, and the data of global step N on rank r come from a generator seeded with
N and r, so a launch that loads a checkpoint continues with the batches of the next step.
Each step logs the exact bits of its loss, its gradient norm and the weight norm after its
update.
"""

import argparse
import json
import sys

import ckpt
import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, TARGETS = 24, 4


def batch(step: int, rank: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(9000 + 100 * step + rank)
    x = torch.randn(rows, FEATURES, generator=g)
    y = torch.stack(
        [
            x[:, :6].sum(1),
            x[:, 6:12].prod(1),
            x[:, 12:18].abs().mean(1),
            torch.sin(x[:, 18:]).sum(1),
        ],
        dim=1,
    )
    return x, y


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, required=True, help="last global step to train")
    p.add_argument("--save")
    p.add_argument("--load")
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(314)
    model = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, TARGETS)
    )
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    first, resumed = 0, None
    if args.load:
        resumed = ckpt.restore(engine, args.load)
        first = resumed + 1
    log = MetricLog(args.out, rank=rank, resumed_from=resumed)
    engine.train()
    for step in range(first, args.steps_to + 1):
        x, y = batch(step, rank, engine.train_micro_batch_size_per_gpu())
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
    log.close()
    if args.save:
        ckpt.save(engine, args.save, args.steps_to)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
