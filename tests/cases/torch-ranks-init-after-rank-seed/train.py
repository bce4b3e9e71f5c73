"""A small MLP classifier trained data-parallel on two CPU ranks (torchrun, gloo), with the
gradient averaging written by hand.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --out DIR \
        [--steps 6] [--seed 1234] [--lr 4e-3] [--warm-start-data]

There is no DDP wrapper and no broadcast: start-up (startup.py) gives every rank the same
initial weights from a shared seed, and after each backward the step all-reduces every
gradient and divides it by the world size, so the replicas take the same update. Each rank
trains on its own stream of batches. --warm-start-data prepares each rank's first batch
during start-up.
"""

import argparse

import startup
import torch
import torch.distributed as dist
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


def average_gradients(params, world: int) -> None:
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(world)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument(
        "--warm-start-data", action="store_true", help="prepare the first batch at start-up"
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, opt, stream = startup.setup_training(args, rank)
    params = list(model.parameters())
    model.train()
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        x, y = next(stream)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        average_gradients(params, world)
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=norm)
        if rank == 0:
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
