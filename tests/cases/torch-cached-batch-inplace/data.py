"""A synthetic table served in fixed batches, epoch after epoch.

The features sit on very different scales and offsets; the label comes from a few of them.
Batch i of every epoch holds the same rows: decoding it stands in for reading and parsing a
shard from disk, so each epoch rebuilds its tensors from scratch. With ``cache`` on, the
table keeps the batches it decoded in the first epoch and serves those again in every later
epoch, which skips the decoding. Nothing here touches the global generators.
"""

import torch

FEATURES, CLASSES = 16, 4
SCALE = torch.logspace(-1, 2, FEATURES)
OFFSET = torch.linspace(-20.0, 35.0, FEATURES)
WEIGHTS = torch.linspace(1.0, 2.5, CLASSES)


def feature_stats() -> tuple[torch.Tensor, torch.Tensor]:
    """The per-feature mean and standard deviation the table was generated with."""
    return OFFSET.clone(), SCALE.clone()


class ShardedTable:
    def __init__(self, batches: int = 3, rows: int = 48, cache: bool = False) -> None:
        self.batches = batches
        self.rows = rows
        self.cache = cache
        self._decoded: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def _decode(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(5000 + index)
        z = torch.randn(self.rows, FEATURES, generator=g)
        y = (z[:, :CLASSES] * WEIGHTS + 0.5 * z[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
        return z * SCALE + OFFSET, y

    def epoch(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if self._decoded is not None:
            return list(self._decoded)
        batches = [self._decode(i) for i in range(self.batches)]
        if self.cache:
            self._decoded = batches
        return batches
