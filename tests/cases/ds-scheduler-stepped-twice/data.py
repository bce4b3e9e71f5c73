"""A fixed synthetic corpus of short token sequences with a class label each, read in
epochs: every epoch shuffles the corpus with a generator seeded by the epoch, and each rank
takes its own shard of that order in micro-batches. Nothing here touches the global
generators."""

import torch

VOCAB, LENGTH, CLASSES = 120, 12, 5
EXAMPLES, MICRO = 128, 16


def _corpus() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2024)
    tokens = torch.randint(0, VOCAB, (EXAMPLES, LENGTH), generator=g)
    labels = (tokens[:, : LENGTH // 2].sum(1) * 3 + tokens[:, -1]) % CLASSES
    return tokens, labels


class ShardedCorpus:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.tokens, self.labels = _corpus()

    @property
    def steps_per_epoch(self) -> int:
        return EXAMPLES // (self.world * MICRO)

    def _order(self, epoch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(31 + epoch)
        return torch.randperm(EXAMPLES, generator=g)[self.rank :: self.world]

    def epoch(self, epoch: int):
        """The micro-batches of one epoch, in order."""
        order = self._order(epoch)
        for i in range(self.steps_per_epoch):
            rows = order[i * MICRO : (i + 1) * MICRO]
            yield self.tokens[rows], self.labels[rows]

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The micro-batch of a global step, counting epochs through the corpus."""
        epoch, i = divmod(step, self.steps_per_epoch)
        rows = self._order(epoch)[i * MICRO : (i + 1) * MICRO]
        return self.tokens[rows], self.labels[rows]
