"""The training data: a fixed synthetic dataset served in a shuffled order per epoch."""

import torch

DATASET, BATCH, FEATURES, CLASSES = 2048, 32, 40, 5


class EpochStream:
    """Batches of a fixed dataset, reshuffled each epoch with a generator seeded by the epoch."""

    def __init__(self, seed: int = 11) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(DATASET, FEATURES, generator=g)
        self.y = (self.x[:, :CLASSES] * torch.arange(1.0, CLASSES + 1)).argmax(dim=1)
        self.epoch, self.position = 0, 0
        self.order = self._order(0)

    def _order(self, epoch: int) -> torch.Tensor:
        return torch.randperm(DATASET, generator=torch.Generator().manual_seed(epoch))

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = epoch, 0
        self.order = self._order(epoch)

    def batches_left(self) -> int:
        return (DATASET - self.position) // BATCH

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.order[self.position : self.position + BATCH]
        self.position += BATCH
        return self.x[idx], self.y[idx]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = state["epoch"], state["position"]
        self.order = self._order(self.epoch)
