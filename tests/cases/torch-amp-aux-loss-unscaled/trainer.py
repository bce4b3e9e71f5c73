"""The optimisation step of the job: a float16 autocast forward, the task loss plus the
routed layer's weighted auxiliary losses, a loss-scaled backward through torch.amp's
GradScaler, the gradients unscaled and clipped by global norm, and the scaler's step.

``train_step`` is the original step. ``train_step_v2`` is its rewrite that keeps the
auxiliary terms apart for logging (each weighted term is reported on its own) and builds the
backward's loss term by term. The two are meant to compute the same update.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _losses(model, x, y, dtype):
    with torch.autocast("cpu", dtype=dtype):
        logits, aux = model(x)
    return F.cross_entropy(logits.float(), y), aux


def _finish(model, opt, scaler, max_norm):
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()
    return norm


def train_step(model, opt, scaler, x, y, *, aux_coefs, max_norm, dtype):
    opt.zero_grad(set_to_none=True)
    task, aux = _losses(model, x, y, dtype)
    loss = task
    for name, value in aux.items():
        loss = loss + aux_coefs[name] * value
    scaler.scale(loss).backward()
    norm = _finish(model, opt, scaler, max_norm)
    return {"loss": loss.detach(), "task_loss": task.detach(), "grad_norm": norm}


def train_step_v2(model, opt, scaler, x, y, *, aux_coefs, max_norm, dtype):
    opt.zero_grad(set_to_none=True)
    task, aux = _losses(model, x, y, dtype)
    stats = {"task_loss": task.detach()}
    total = task.detach()
    objective = scaler.scale(task)
    for name, value in aux.items():
        term = aux_coefs[name] * value
        objective = objective + term
        total = total + term.detach()
        stats[f"{name}_loss"] = term.detach()
    objective.backward()
    stats["grad_norm"] = _finish(model, opt, scaler, max_norm)
    return {"loss": total, **stats}
