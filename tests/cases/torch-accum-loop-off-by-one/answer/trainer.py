"""The fix the ground truth applies: v2's step counts its micro-batches from 1 to accum
inclusive, range(1, accum + 1), so it pulls all accum of them from the stream (range(1, accum)
pulled accum - 1, each still weighted 1/accum, and the stream ran ahead of the steps)."""

import torch


def fit_batch(self, stream):
    self.opt.zero_grad(set_to_none=True)
    total = torch.zeros(())
    for micro in range(1, self.accum + 1):
        x, y = next(stream)
        total += self._micro_backward(x, y)
        if self.verbose:
            print(f"  micro-batch {micro}/{self.accum} ({self.samples_seen} samples)")
    norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
    self.opt.step()
    return {"loss": total, "grad_norm": norm}
