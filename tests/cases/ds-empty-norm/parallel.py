"""Tensor/data-parallel process groups in the Megatron style, handed to DeepSpeed as ``mpu``.

Ranks 0..tp-1 form the first tensor-parallel group, and so on; data-parallel groups take one
rank of each. With tp = 1 every rank is its own tensor-parallel group.
"""

import torch.distributed as dist


class Groups:
    def __init__(self, tp: int) -> None:
        world, rank = dist.get_world_size(), dist.get_rank()
        if world % tp:
            raise SystemExit(f"world size {world} is not a multiple of tp {tp}")
        self.tp = tp
        self.tp_rank, self.dp_rank = rank % tp, rank // tp
        self.tp_group = self.dp_group = None
        for first in range(0, world, tp):  # every rank creates every group, in order
            g = dist.new_group(list(range(first, first + tp)))
            if first <= rank < first + tp:
                self.tp_group = g
        for offset in range(tp):
            g = dist.new_group(list(range(offset, world, tp)))
            if rank % tp == offset:
                self.dp_group = g
        self.dp = world // tp

    def get_model_parallel_rank(self) -> int:
        return self.tp_rank

    def get_model_parallel_world_size(self) -> int:
        return self.tp

    def get_model_parallel_group(self):
        return self.tp_group

    get_tensor_model_parallel_rank = get_model_parallel_rank
    get_tensor_model_parallel_world_size = get_model_parallel_world_size
    get_tensor_model_parallel_group = get_model_parallel_group

    def get_data_parallel_rank(self) -> int:
        return self.dp_rank

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_group(self):
        return self.dp_group
