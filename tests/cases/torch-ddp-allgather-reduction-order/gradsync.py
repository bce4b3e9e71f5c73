"""Gradient averaging across the data-parallel ranks, done by hand (no DDP wrapper).

The model computes in bfloat16 and the optimizer holds float32 master weights; after each
backward every master weight receives the average over the ranks of its bf16 gradient.

``allreduce``: one all-reduce (sum) of the bf16 gradient in place, divided by the world
size, then widened to float32.
``gather``: every rank's bf16 gradient is all-gathered, and each rank adds the copies up
itself, in rank order, into a float32 accumulator and divides; the sum then no longer
depends on how the backend's collective splits and orders its additions.
"""

import torch
import torch.distributed as dist


def allreduce_average(grad: torch.Tensor, world: int) -> torch.Tensor:
    dist.all_reduce(grad, op=dist.ReduceOp.SUM)
    grad.div_(world)
    return grad.float()


def gather_average(grad: torch.Tensor, world: int) -> torch.Tensor:
    parts = [torch.empty_like(grad) for _ in range(world)]
    dist.all_gather(parts, grad.contiguous())
    total = torch.zeros_like(grad, dtype=torch.float32)
    for part in parts:  # rank 0, 1, ...: the same order on every rank
        total.add_(part)
    return total.div_(world)


SYNC = {"allreduce": allreduce_average, "gather": gather_average}


def sync_gradients(
    params: list[torch.nn.Parameter], masters: list[torch.Tensor], world: int, mode: str
) -> None:
    average = SYNC[mode]
    for q, m in zip(params, masters, strict=True):
        m.grad = average(q.grad, world)
        q.grad = None
