"""The job's checkpoints, written behind the training loop.

A checkpoint (the model, the AdamW state and the step it was taken after) costs a
torch.save of every weight and both Adam moments, which would stall the step that asks for
it. So the job hands checkpoints to a CheckpointWriter: ``request`` takes the state at the
save step and returns at once, and the file is written by ``flush`` one step later (the job
flushes at the end of every step, and at exit), the way an async saver keeps the I/O off
the step that asked for it. ``load`` brings a file back for a resumed process.
"""

import os

import torch
import torch.nn as nn


def capture_state(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> dict:
    """The training state after ``step``, as the checkpoint file holds it."""
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "step": step,
    }


class CheckpointWriter:
    def __init__(self) -> None:
        self.pending: tuple[str, dict] | None = None

    def request(self, path: str, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
        """Checkpoint the state after ``step`` to ``path``; the file is written by flush."""
        self.flush()
        self.pending = (path, capture_state(model, opt, step))

    def flush(self) -> None:
        """Write the requested checkpoint, if any (atomically: a temporary file, renamed)."""
        if self.pending is None:
            return
        path, state = self.pending
        self.pending = None
        tmp = path + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, path)


def load(path: str, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bring the model and the optimizer back; the step the checkpoint was taken after."""
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])
