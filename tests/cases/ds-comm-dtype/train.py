"""A bf16 embedding-bag text classifier trained by DeepSpeed ZeRO stage 2 on two CPU ranks
(gloo), two accumulated micro-batches per step, fp32 gradient accumulation.

    deepspeed --num_gpus 2 train.py --deepspeed_config fp32_comm.json --out DIR
"""

import argparse
import json
import sys

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

VOCAB, CLASSES = 200, 4


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, 32, mode="mean")
        self.head = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, CLASSES))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(tokens))


def documents(step: int, micro: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 613 + micro * 17 + rank)
    label = torch.randint(0, CLASSES, (12,), generator=g)
    words = torch.randint(0, VOCAB // CLASSES, (12, 10), generator=g)
    return words + label[:, None] * (VOCAB // CLASSES), label


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(64)
    model = BagClassifier()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        losses = []
        for micro in range(engine.gradient_accumulation_steps()):
            tokens, label = documents(step, micro, rank)
            loss = F.cross_entropy(engine(tokens).float(), label)
            engine.backward(loss)
            engine.step()
            losses.append(loss.detach())
        log.log(step, loss=torch.stack(losses).mean(), grad_norm=engine.get_global_grad_norm())
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
