"""Data audit: every few steps, look at a handful of the batch's rows and complain about
anything suspicious (non-finite features, labels out of range), for a human to read.

It only reads the batch; the tensors the model sees are left as they are.
"""

import numpy as np
import torch


def sample_rows(rows: int, k: int) -> np.ndarray:
    return np.random.choice(rows, size=k, replace=False)


class BatchAudit:
    def __init__(self, every: int, classes: int, rows: int = 4) -> None:
        self.every, self.classes, self.rows = every, classes, rows
        self.flagged = 0

    def __call__(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        if not self.every or (step + 1) % self.every:
            return
        picked = sample_rows(x.shape[0], self.rows)
        for i in picked.tolist():
            finite = bool(torch.isfinite(x[i]).all())
            label = int(y[i])
            ok = finite and 0 <= label < self.classes
            self.flagged += not ok
            print(f"audit step {step}: row {i} label {label} finite {finite} {'ok' if ok else 'BAD'}")
