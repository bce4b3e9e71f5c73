"""Gradient reduction for a bf16 model with fp32 main gradients (Megatron-style).

Each micro-batch's bf16 gradient is all-reduced in fp32 and added to the parameter's fp32
``main_grad``. ``FoldedGradReducer`` serves the folded layout, where the gradients of a
fold share one bucket per parameter.
"""

import torch
import torch.distributed as dist


class GradReducer:
    def __init__(self, world: int) -> None:
        self.world = world

    def reduce_into(self, param: torch.nn.Parameter) -> None:
        reduced = param.grad.float()
        dist.all_reduce(reduced)
        reduced.div_(self.world)
        param.main_grad.add_(reduced)


class FoldedGradReducer(GradReducer):
    def __init__(self, world: int, fold: int) -> None:
        super().__init__(world)
        self.fold = fold
        self.buckets: dict[int, torch.Tensor] = {}

    def reduce_into(self, param: torch.nn.Parameter) -> None:
        bucket = self.buckets.setdefault(id(param), torch.empty_like(param.grad))
        reduced = param.grad.float()
        dist.all_reduce(reduced)
        reduced.div_(self.world)
        bucket.copy_(reduced)
        param.main_grad.add_(bucket.float())
