"""The ``unscale-first`` policy: gradients are clipped after the loss scale is taken out.

With a ``GradScaler``, the gradients the backward leaves are multiplied by the loss scale
until ``scaler.unscale_(optimizer)`` (or ``scaler.step``) divides it out. A clip by norm or
by value applied before that clips the scaled gradients: the threshold meets numbers
thousands of times too large, and the clip acts where it should not (or not where it
should), with no error. PyTorch documents the order: unscale, then clip.

This policy wraps ``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_``: when a live,
enabled ``GradScaler`` has not yet unscaled an optimizer that holds the parameters being
clipped, it unscales that optimizer first, and the job's own later ``unscale_`` of it in the
same step does nothing (it would raise). If every step then matches, clipping scaled
gradients carried the difference, and the place is the job's line that clipped, reported
beside the run's metrics (:data:`REPORT`).

Limits: a clip the job computes by hand (a norm and a multiply of its own) is not seen; an
optimizer the scaler reaches only through ``scaler.step`` without a clip is left alone.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .metrics_reports import BesideMetrics

REPORT = ".triage-unscale-first.json"


def install() -> None:
    import torch
    from torch.amp.grad_scaler import GradScaler, OptState

    out = BesideMetrics(REPORT)
    scalers: weakref.WeakSet[Any] = weakref.WeakSet()
    optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
    for cls, live in ((GradScaler, scalers), (torch.optim.Optimizer, optimizers)):
        init = cls.__init__

        def __init__(obj: Any, *a: Any, _init: Any = init, _live: Any = live, **k: Any) -> None:
            _init(obj, *a, **k)
            _live.add(obj)

        cls.__init__ = __init__
    ours: set[tuple[int, int]] = set()  # (scaler, optimizer) unscaled here this step

    def unscale_pending(params: Any) -> bool:
        if isinstance(params, torch.Tensor):
            params = [params]
        wanted = {id(p) for p in params}
        done = False
        for scaler in list(scalers):
            if not scaler.is_enabled() or scaler.get_scale() == 1.0:
                continue
            for opt in list(optimizers):
                held = {id(p) for g in opt.param_groups for p in g["params"]}
                if not held & wanted:
                    continue
                state = scaler._per_optimizer_states[id(opt)]
                if state["stage"] is OptState.READY:
                    scaler.unscale_(opt)
                    ours.add((id(scaler), id(opt)))
                    done = True
        return done

    def before_clip(fn: Any, what: str) -> Any:
        @functools.wraps(fn)
        def clip(parameters: Any, *args: Any, **kwargs: Any) -> Any:
            params = list(parameters) if not isinstance(parameters, torch.Tensor) else parameters
            if unscale_pending(params) and what not in out.report:
                where = job_line((TORCH, PROJECT, DEEPSPEED), depth=2)
                out.report[what] = {
                    "at": f"{where[0]}:{where[1]}" if where else None,
                    "verb": f"{what} on gradients the GradScaler has not yet unscaled",
                }
                out.write()
            return fn(params, *args, **kwargs)

        return clip

    utils = torch.nn.utils
    for name in ("clip_grad_norm_", "clip_grad_value_"):
        wrapped = before_clip(getattr(utils.clip_grad, name), name)
        setattr(utils.clip_grad, name, wrapped)
        setattr(utils, name, wrapped)

    unscale = GradScaler.unscale_
    update = GradScaler.update

    def unscale_(scaler: Any, optimizer: Any) -> None:
        if (id(scaler), id(optimizer)) in ours:
            return  # taken out already, before the clip
        unscale(scaler, optimizer)

    def update_(scaler: Any, *args: Any, **kwargs: Any) -> None:
        for key in [k for k in ours if k[0] == id(scaler)]:
            ours.discard(key)
        update(scaler, *args, **kwargs)

    GradScaler.unscale_ = unscale_
    GradScaler.update = update_
