"""A bf16 convolutional autoencoder trained by DeepSpeed on one CPU rank (gloo), AdamW
with two parameter groups (weight decay on weights only), fp32 gradient accumulation.

    deepspeed --num_gpus 1 train.py --deepspeed_config zero1.json --out DIR

Besides the loss, each step logs the largest Adam second moment over all parameters (a
loss-spike early warning), read through DeepSpeed's safe_get_full_optimizer_state.
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F
from deepspeed.utils import safe_get_full_optimizer_state

from triage_agent.metrics import MetricLog


def build() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1),
        nn.SiLU(),
        nn.Conv2d(6, 6, 3, stride=2, padding=1),
        nn.SiLU(),
        nn.ConvTranspose2d(6, 1, 4, stride=2, padding=1),
    )


def images(step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step + 40)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 12), torch.linspace(-1, 1, 12), indexing="ij")
    c = torch.rand(8, 2, 1, 1, generator=g) - 0.5
    blobs = torch.exp(-((xx - c[:, :1]) ** 2 + (yy - c[:, 1:]) ** 2) * 8)
    return blobs.bfloat16()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(13)
    model = build()
    groups = [
        {"params": [q for q in model.parameters() if q.dim() > 1], "weight_decay": 0.05},
        {"params": [q for q in model.parameters() if q.dim() <= 1], "weight_decay": 0.0},
    ]
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=config)
    log = MetricLog(args.out, rank=0)
    for step in range(args.steps):
        x = images(step)
        loss = F.mse_loss(engine(x).float(), x.float())
        engine.backward(loss)
        engine.step()
        v_max = max(
            safe_get_full_optimizer_state(q, "exp_avg_sq").max() for q in model.parameters()
        )
        log.log(step, loss=loss.detach(), adam_v_max=v_max)
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
