"""One micro-batch at a time: forward, backward into the parameters' .grad, and at the end
of every window of ``micro_per_step`` micro-batches a clipped AdamW step.

The trainer can be checkpointed after any micro-batch (the job writes one every N
micro-batches): ``checkpointed`` lists the items a checkpoint holds, each with
``state_dict()`` and ``load_state_dict()``.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RngState:
    """The global CPU generator (the dropout masks' stream) as a checkpoint item."""

    def state_dict(self) -> dict:
        return {"cpu": torch.get_rng_state()}

    def load_state_dict(self, state: dict) -> None:
        torch.set_rng_state(state["cpu"])


class Window:
    """Progress through training: micro-batches backpropagated so far, and the loss summed
    over the current optimizer step's window (logged when the window ends)."""

    def __init__(self, micro_per_step: int) -> None:
        self.micro_per_step = micro_per_step
        self.micro = 0
        self.loss_sum = torch.zeros(())

    def state_dict(self) -> dict:
        return {"micro": self.micro, "loss_sum": self.loss_sum.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.micro = int(state["micro"])
        self.loss_sum = state["loss_sum"].clone()


class Trainer:
    def __init__(self, model: nn.Module, opt: torch.optim.Optimizer, data, micro_per_step: int) -> None:
        self.model, self.opt, self.data = model, opt, data
        self.window = Window(micro_per_step)

    def checkpointed(self) -> dict:
        """What a checkpoint holds, by name."""
        return {
            "model": self.model,
            "optimizer": self.opt,
            "data": self.data,
            "rng": RngState(),
            "window": self.window,
        }

    def micro_step(self) -> dict | None:
        """One micro-batch; the step's metrics when it closes a window, else None."""
        w = self.window
        if w.micro % w.micro_per_step == 0:
            self.opt.zero_grad(set_to_none=True)
            w.loss_sum = torch.zeros(())
        x, y = self.data.next_batch()
        loss = F.mse_loss(self.model(x), y) / w.micro_per_step
        loss.backward()
        w.loss_sum += loss.detach()
        w.micro += 1
        if w.micro % w.micro_per_step:
            return None
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return {"step": w.micro // w.micro_per_step - 1, "loss": w.loss_sum, "grad_norm": norm}
