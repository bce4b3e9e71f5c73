"""A bf16 two-layer MLP trained by DeepSpeed on two CPU ranks (gloo) with a Megatron-style
model-parallel unit (parallel.py) of tensor-parallel size 2.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --tp 2 --out DIR

No layer is split yet: both tensor-parallel ranks hold the whole model and see the same
batch. The data-parallel rank picks the batch.
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F
from parallel import Groups

from triage_agent.metrics import MetricLog


def batch(step: int, dp_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7919 * step + dp_rank)
    x = torch.randn(16, 32, generator=g)
    return x.bfloat16(), (x @ torch.linspace(-1, 1, 32)).sign().add(1).long().clamp(max=1)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    groups = Groups(args.tp)
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(99)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 2))
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config, mpu=groups
    )
    log = MetricLog(args.out, rank=torch.distributed.get_rank())
    for step in range(args.steps):
        x, y = batch(step, groups.dp_rank)
        loss = F.cross_entropy(engine(x).float(), y)
        engine.backward(loss)
        engine.step()
        log.log(step, loss=loss.detach())
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
