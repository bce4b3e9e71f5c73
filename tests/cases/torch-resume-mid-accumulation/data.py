"""The training data: a fixed synthetic regression set, shuffled once, served one
micro-batch at a time from a cursor. Nothing here touches the global generators."""

import torch

ROWS, MICRO_ROWS, FEATURES = 1024, 16, 12


class MicroBatchStream:
    """Micro-batches of a fixed dataset in one seeded shuffled order; ``position`` is the
    next row of that order to serve."""

    def __init__(self, seed: int = 23) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(ROWS, FEATURES, generator=g)
        signal = torch.sin(self.x[:, :3].sum(dim=1, keepdim=True)) + 0.3 * self.x[:, 3:4]
        self.y = signal + 0.05 * torch.randn(ROWS, 1, generator=g)
        self.order = torch.randperm(ROWS, generator=g)
        self.position = 0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.position + MICRO_ROWS > ROWS:
            self.position = 0
        idx = self.order[self.position : self.position + MICRO_ROWS]
        self.position += MICRO_ROWS
        return self.x[idx], self.y[idx]

    def state_dict(self) -> dict:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = int(state["position"])
