"""The job's accumulation loops: a window of micro-batches per optimizer step, run through a
DistributedDataParallel model. Gradients accumulate locally under DDP's no_sync() and are
all-reduced (averaged over the ranks) once per window, by the backward of the window's
closing micro-batch.

``fit_windows``: the step loop; it is handed each step's window as a list.
``fit_streamed``: one flat loop over the run's micro-batch stream, so no window is held as a
list and the loader runs on across step boundaries; it counts micro-batches and steps the
optimizer after every ``accum`` of them.
"""

from contextlib import nullcontext

import torch
import torch.nn.functional as F

CLIP = 2.0


def micro_backward(model, x: torch.Tensor, y: torch.Tensor, accum: int) -> torch.Tensor:
    """Forward and backward of one micro-batch, its loss weighted 1/accum; returns the loss."""
    loss = F.cross_entropy(model(x), y)
    (loss / accum).backward()
    return loss.detach()


def finish_step(params, opt, losses: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Clip, step and clear the window's gradients; returns its mean loss and the norm."""
    norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return torch.stack(losses).mean(), norm


def fit_windows(model, opt, params, windows, accum: int, log) -> None:
    for step, window in enumerate(windows):
        losses = []
        for i, (x, y) in enumerate(window):
            closing = i == len(window) - 1
            with nullcontext() if closing else model.no_sync():
                losses.append(micro_backward(model, x, y, accum))
        loss, norm = finish_step(params, opt, losses)
        log.log(step, loss=loss, grad_norm=norm)


def fit_streamed(model, opt, params, stream, accum: int, log) -> None:
    losses = []
    for micro, (x, y) in enumerate(stream):
        # all-reduce on the window's closing micro-batch; the others accumulate locally
        sync = micro % accum == 0
        with nullcontext() if sync else model.no_sync():
            losses.append(micro_backward(model, x, y, accum))
        if (micro + 1) % accum == 0:
            loss, norm = finish_step(params, opt, losses)
            log.log(micro // accum, loss=loss, grad_norm=norm)
            losses = []
