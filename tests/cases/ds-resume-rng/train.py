"""A tabular MLP with dropout trained by DeepSpeed ZeRO stage 2 on one CPU rank (gloo).

    deepspeed --num_gpus 1 train.py --deepspeed_config ds.json --out DIR --steps-to 7
    deepspeed --num_gpus 1 train.py --deepspeed_config ds.json --out DIR --steps-to 3 --save CK
    deepspeed --num_gpus 1 train.py --deepspeed_config ds.json --out DIR --steps-to 7 --resume CK

The checkpoint is DeepSpeed's own (model, optimizer, scheduler); the step it was taken after
travels in its client state. The data of step N are drawn from a generator seeded with N.
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


def tabular(step: int, rows: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(500 + step)
    x = torch.randn(rows, 20, generator=g)
    return x, (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 1).long()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, required=True)
    p.add_argument("--save")
    p.add_argument("--resume")
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(2024)
    model = nn.Sequential(
        nn.Linear(20, 64),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(64, 64),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(64, 3),
    )
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    first, resumed = 0, None
    if args.resume:
        _, client = engine.load_checkpoint(args.resume)
        resumed = int(client["step"])
        first = resumed + 1
    log = MetricLog(args.out, rank=0, resumed_from=resumed)
    engine.train()
    for step in range(first, args.steps_to + 1):
        x, y = tabular(step)
        loss = F.cross_entropy(engine(x), y)
        engine.backward(loss)
        engine.step()
        log.log(step, loss=loss.detach(), grad_norm=engine.get_global_grad_norm())
    log.close()
    if args.save:
        engine.save_checkpoint(args.save, tag="last", client_state={"step": args.steps_to})
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
