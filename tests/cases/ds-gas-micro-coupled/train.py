"""A small fp32 MLP classifier trained by DeepSpeed on one CPU rank (gloo), AdamW, with a
global batch of 8 samples per optimizer step split into micro-batches.

    deepspeed --num_gpus 1 train.py --micro 4 --gas 2 --out DIR --steps 4

--micro and --gas go into the DeepSpeed config (dsconf.py); the loop takes the split from
the engine. Each optimizer step logs the exact bits of the loss, the gradient norm and the weight norm.
"""

import argparse
import sys

import deepspeed
import dsconf
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 16, 3


def step_batch(step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3001 + step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] * torch.tensor([1.0, 1.5, 2.0])).argmax(dim=1)
    return x, y


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--micro", type=int, required=True, help="micro-batch size per rank")
    p.add_argument("--gas", type=int, required=True, help="gradient accumulation steps")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    config = dsconf.build_config(args.micro, args.gas)
    torch.manual_seed(21)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, CLASSES))
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    micro, gas = engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps()
    log = MetricLog(args.out, rank=torch.distributed.get_rank())
    for step in range(args.steps):
        x, y = step_batch(step, engine.train_batch_size())
        losses = []
        for m in range(gas):
            sl = slice(m * micro, (m + 1) * micro)
            loss = F.cross_entropy(engine(x[sl]), y[sl])
            engine.backward(loss)
            engine.step()
            losses.append(loss.detach())
        with torch.no_grad():
            weight_norm = torch.stack([q.norm() for q in engine.module.parameters()]).norm()
        log.log(
            step,
            loss=torch.stack(losses).mean(),
            grad_norm=engine.get_global_grad_norm(),
            weight_norm=weight_norm,
        )
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
