"""The input pipeline: a fixed table of examples, shuffled and augmented with numpy.

Each batch is a random draw of rows (``np.random.permutation``) with a little Gaussian
jitter added to the features (``np.random.normal``), both from numpy's global generator,
which the training script seeds once at start-up so that a run repeats itself.
"""

import numpy as np
import torch

ROWS, FEATURES, CLASSES = 384, 16, 4


def table() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2024)
    x = rng.standard_normal((ROWS, FEATURES)).astype(np.float32)
    w = np.linspace(0.5, 2.0, CLASSES, dtype=np.float32)
    y = (x[:, :CLASSES] * w).argmax(axis=1).astype(np.int64)
    return x, y


class JitteredBatches:
    def __init__(self, x: np.ndarray, y: np.ndarray, batch: int, noise: float = 0.05) -> None:
        self.x, self.y, self.batch, self.noise = x, y, batch, noise

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = np.random.permutation(len(self.x))[: self.batch]
        xb = self.x[idx] + np.random.normal(0.0, self.noise, (self.batch, self.x.shape[1]))
        return torch.from_numpy(xb.astype(np.float32)), torch.from_numpy(self.y[idx])
