"""The training step: ``accum`` micro-batches accumulated into one optimizer step, each
micro-batch's loss weighted 1/accum, the global gradient norm clipped, then AdamW. Each step
returns its loss (the sum of the weighted micro-batch losses, the step's mean) and its
gradient norm before the clip.

Two implementations, selected by name (``STEP_IMPLS``, the launcher's --step-impl):

- ``eager``: back-propagates each micro-batch's weighted loss as soon as it is computed and
  sums the detached values for the report.
- ``fused``: keeps the step's loss as one autograd tensor, the running sum of the weighted
  micro-batch losses, so the value reported is the tensor the step back-propagates; the
  backward runs as each micro-batch arrives, interleaved with the next forward (the shape
  the job's compute/communication overlap work builds on).
"""

import torch
import torch.nn.functional as F


class EagerStep:
    def __init__(self, model, opt, accum: int, max_norm: float) -> None:
        self.model, self.opt = model, opt
        self.accum, self.max_norm = accum, max_norm

    def _micro_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.model(x), y) / self.accum

    def _update(self) -> torch.Tensor:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return norm

    def train_batch(self, micro_batches) -> dict:
        total = torch.zeros(())
        for x, y in micro_batches:
            loss = self._micro_loss(x, y)
            loss.backward()
            total += loss.detach()
        return {"loss": total, "grad_norm": self._update()}


class FusedStep(EagerStep):
    def train_batch(self, micro_batches) -> dict:
        total = torch.zeros(())
        for x, y in micro_batches:
            total = total + self._micro_loss(x, y)
            total.backward(retain_graph=True)
        return {"loss": total.detach(), "grad_norm": self._update()}


STEP_IMPLS = {"eager": EagerStep, "fused": FusedStep}
