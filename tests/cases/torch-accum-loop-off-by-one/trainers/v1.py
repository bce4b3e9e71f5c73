"""The trainer: each optimizer step pulls ``accum`` micro-batches from the stream, weights
each one's loss by 1/accum and back-propagates it, then clips and steps once."""

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, opt, accum: int, max_norm: float) -> None:
        self.model, self.opt = model, opt
        self.accum, self.max_norm = accum, max_norm

    def fit_batch(self, stream) -> dict:
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros(())
        for _ in range(self.accum):
            x, y = next(stream)
            loss = F.cross_entropy(self.model(x), y) / self.accum
            loss.backward()
            total += loss.detach()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.opt.step()
        return {"loss": total, "grad_norm": norm}
