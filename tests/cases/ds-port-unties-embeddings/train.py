"""Pretraining of a small character-level language model with DeepSpeed ZeRO stage 2 on two
CPU ranks (gloo), AdamW, every engine setting read from one DeepSpeed JSON config.

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps 5

The model package, charlm, is found on PYTHONPATH. Each rank reads its own shard of a
synthetic stream (a generator seeded per step and rank): sequences of a noisy affine walk
over the vocabulary. Each optimizer step logs the exact bits of the next-token loss and the
next-token accuracy of the step's batch.
"""

import argparse
import json
import sys

import charlm
import deepspeed
import torch
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

VOCAB, CONTEXT = 48, 16


def shard_batch(step: int, rank: int, rows: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(4400 + 19 * step + rank)
    start = torch.randint(0, VOCAB, (rows, 1), generator=g)
    jumps = torch.randint(0, 3, (rows, CONTEXT), generator=g)
    return (start + 7 * torch.arange(CONTEXT) + jumps.cumsum(dim=1)) % VOCAB


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
    torch.manual_seed(23)
    model = charlm.CharLM(VOCAB, CONTEXT, dim=32, depth=1)
    if rank == 0:
        print(f"charlm {charlm.__version__}")
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        seq = shard_batch(step, rank, config["train_micro_batch_size_per_gpu"])
        logits = engine(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        engine.backward(loss)
        engine.step()
        accuracy = (logits.detach().argmax(dim=-1) == seq[:, 1:]).float().mean()
        log.log(step, loss=loss.detach(), accuracy=accuracy)
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
