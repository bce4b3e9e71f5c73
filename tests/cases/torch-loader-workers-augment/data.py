"""The training data: short noisy 1-D signals of three shapes (a ramp, a bump, a step),
each a fixed table built once from the job's seed, and a light perturbation applied as a
sample is read (a small circular shift and a little Gaussian noise) so that the classifier
does not memorise the exact traces.

The table is built with a generator of its own; the per-sample perturbation is what the
epoch loop sees fresh every epoch.
"""

import torch
from torch.utils.data import Dataset

LENGTH, CLASSES = 16, 3


def make_table(seed: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(-1.0, 1.0, LENGTH)
    shapes = torch.stack([t, torch.exp(-8.0 * t * t), (t > 0).float() - 0.5])
    labels = torch.randint(0, CLASSES, (rows,), generator=g)
    scale = 0.5 + torch.rand(rows, 1, generator=g)
    x = shapes[labels] * scale + 0.1 * torch.randn(rows, LENGTH, generator=g)
    return x, labels


class NoisySignals(Dataset):
    def __init__(self, seed: int, rows: int = 96, shift: int = 2, noise: float = 0.05) -> None:
        self.seed, self.shift, self.noise = seed, shift, noise
        self.x, self.y = make_table(seed, rows)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.y)

    def perturb(self, index: int, signal: torch.Tensor) -> torch.Tensor:
        k = int(torch.randint(-self.shift, self.shift + 1, ()))
        return torch.roll(signal, k) + self.noise * torch.randn(signal.shape)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.perturb(index, self.x[index]), self.y[index]
