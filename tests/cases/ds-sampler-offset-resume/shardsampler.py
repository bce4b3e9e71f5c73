"""A resumable sampler: each rank walks its own shard of one seeded permutation per epoch.

The sampler remembers how far into the epoch it has handed out indices, so that a job can
save it with its checkpoint and continue where it stopped.
"""

import torch
from torch.utils.data import Sampler


class ShardSampler(Sampler[int]):
    def __init__(self, size: int, rank: int, world: int, seed: int = 0):
        self.size, self.rank, self.world, self.seed = size, rank, world, seed
        self.epoch = 0
        self.offset = 0

    def _shard(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        return torch.randperm(self.size, generator=g)[self.rank :: self.world].tolist()

    def __len__(self) -> int:
        return len(self._shard()) - self.offset

    def __iter__(self):
        shard = self._shard()
        while self.offset < len(shard):
            i = shard[self.offset]
            self.offset += 1
            yield i
        self.epoch, self.offset = self.epoch + 1, 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        vars(self).update(state)
