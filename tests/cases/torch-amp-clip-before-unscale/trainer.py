"""The optimisation step of the job: an autocast forward, a loss-scaled backward through
torch.amp's GradScaler, gradient clipping by global norm, and the scaler's optimizer step.

``train_step`` is the original step, one batch at a time. ``train_step_v2`` is its rewrite
for gradient accumulation: the batch arrives as a list of micro-batches, each one's loss is
divided by their count and back-propagated on its own, and the clip and the update run once
at the end. With a single micro-batch the two are meant to compute the same update.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _forward_loss(model, x, y, dtype):
    with torch.autocast("cpu", dtype=dtype):
        logits = model(x)
    return F.cross_entropy(logits.float(), y)


def train_step(model, opt, scaler, x, y, *, max_norm, dtype):
    opt.zero_grad(set_to_none=True)
    loss = _forward_loss(model, x, y, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()
    return {"loss": loss.detach(), "grad_norm": norm}


def train_step_v2(model, opt, scaler, micro_batches, *, max_norm, dtype):
    opt.zero_grad(set_to_none=True)
    count = len(micro_batches)
    total = torch.zeros(())
    for x, y in micro_batches:
        loss = _forward_loss(model, x, y, dtype) / count
        scaler.scale(loss).backward()
        total += loss.detach()
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    return {"loss": total, "grad_norm": norm}
