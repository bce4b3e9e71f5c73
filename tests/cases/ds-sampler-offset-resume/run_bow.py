"""Bag-of-embeddings sentiment classifier trained by DeepSpeed ZeRO-1 on CPU ranks (gloo).

    deepspeed --num_gpus 1 run_bow.py --ds zero1.json --metrics DIR --until 7
    deepspeed --num_gpus 1 run_bow.py --ds zero1.json --metrics DIR --until 3 --ckpt-out CK
    deepspeed --num_gpus 1 run_bow.py --ds zero1.json --metrics DIR --until 7 --ckpt-in CK

The corpus is a fixed synthetic set of token sequences; each rank reads its shard through
a ShardSampler, which goes into the checkpoint's client state beside the global step.
"""

import argparse

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
from shardsampler import ShardSampler
from torch.utils.data import DataLoader, TensorDataset

from triage_agent.metrics import MetricLog

VOCAB, LENGTH, EXAMPLES = 300, 24, 512


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 48, mode="mean")
        self.proj = nn.Sequential(nn.Linear(48, 48), nn.SiLU(), nn.Linear(48, 2))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(tokens))


def corpus() -> TensorDataset:
    g = torch.Generator().manual_seed(77)
    tokens = torch.randint(0, VOCAB, (EXAMPLES, LENGTH), generator=g)
    labels = ((tokens < VOCAB // 3).sum(1) > LENGTH // 3).long()
    return TensorDataset(tokens, labels)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--ds", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--until", type=int, required=True, help="last global step to train")
    p.add_argument("--ckpt-out")
    p.add_argument("--ckpt-in")
    p.add_argument("--local_rank", type=int, default=-1)
    return p.parse_args()


def main() -> None:
    args = parse()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(11)
    model = BagClassifier()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=args.ds
    )
    data = corpus()
    sampler = ShardSampler(len(data), rank, world, seed=3)
    global_step, resumed = 0, None
    if args.ckpt_in:
        _, extra = engine.load_checkpoint(args.ckpt_in, tag="latest-save")
        sampler.load_state_dict(extra["sampler"])
        resumed = extra["global_step"]
        global_step = resumed + 1
    loader = DataLoader(data, batch_size=engine.train_micro_batch_size_per_gpu(), sampler=sampler)
    metrics = MetricLog(args.metrics, rank=rank, resumed_from=resumed)
    lossf = nn.CrossEntropyLoss()
    batches = iter(loader)
    while global_step <= args.until:
        tokens, labels = next(batches)
        loss = lossf(engine(tokens), labels)
        engine.backward(loss)
        engine.step()
        metrics.log(global_step, loss=loss.detach(), lr=engine.get_lr()[0])
        global_step += 1
    metrics.close()
    if args.ckpt_out:
        engine.save_checkpoint(
            args.ckpt_out,
            tag="latest-save",
            client_state={"global_step": args.until, "sampler": sampler.state_dict()},
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
