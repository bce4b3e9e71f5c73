"""The trainer: each optimizer step pulls ``accum`` micro-batches from the stream, weights
each one's loss by 1/accum and back-propagates it, then clips and steps once.

Since v1: the trainer counts the samples it has trained on (``samples_seen``, for throughput
reports) and, when ``verbose``, prints each micro-batch's progress within its step.
"""

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, opt, accum: int, max_norm: float, verbose: bool = False) -> None:
        self.model, self.opt = model, opt
        self.accum, self.max_norm = accum, max_norm
        self.verbose = verbose
        self.samples_seen = 0

    def _micro_backward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(self.model(x), y) / self.accum
        loss.backward()
        self.samples_seen += x.shape[0]
        return loss.detach()

    def fit_batch(self, stream) -> dict:
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros(())
        for micro in range(1, self.accum):
            x, y = next(stream)
            total += self._micro_backward(x, y)
            if self.verbose:
                print(f"  micro-batch {micro}/{self.accum} ({self.samples_seen} samples)")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.opt.step()
        return {"loss": total, "grad_norm": norm}
