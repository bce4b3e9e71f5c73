"""A wide MLP trained data-parallel on two CUDA devices (NCCL), gradients reduced by hand:
all of them flattened into one bucket and all-reduced asynchronously.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py \
        --out DIR --overlap-comm 0

``--overlap-comm 1`` overlaps the scaling of the bucket with the reduction.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


def sync_grads(params: list[torch.nn.Parameter], world: int, overlap: bool) -> None:
    bucket = torch.cat([q.grad.flatten() for q in params])
    work = dist.all_reduce(bucket, async_op=True)
    if overlap:
        bucket.div_(world)
        work.wait()
    else:
        work.wait()
        bucket.div_(world)
    offset = 0
    for q in params:
        q.grad.copy_(bucket[offset : offset + q.numel()].view_as(q))
        offset += q.numel()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--overlap-comm", type=int, choices=[0, 1], default=0)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.GELU(), nn.Linear(4096, 2048)).cuda()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        g = torch.Generator().manual_seed(step * 100 + rank)
        x = torch.randn(32, 2048, generator=g).cuda()
        loss = F.mse_loss(model(x), x.roll(1, dims=1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sync_grads(params, world, bool(args.overlap_comm))
        opt.step()
        log.log(step, loss=loss.detach())
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
