"""The ``rebind-optimizer`` policy: an optimizer updates the parameters its model trains with.

An optimizer holds the Parameter objects it was given when it was built. A job that then
replaces part of its model (a layer swapped for a wrapped or converted copy, an adapter
injected, a weight given a Parameter of its own) trains with tensors no optimizer holds,
while the optimizer updates tensors the model no longer uses: the new ones never move. The
state capture sees it as parameters outside every optimizer
(:func:`triage_agent.module_structure.structure`).

This policy records, when each optimizer is built, the name each of its parameters has in
the job's top-level modules. At the optimizer's first step it gives every group entry that
is no longer the model's parameter of that name the model's current one (same shape and
dtype, held by no other group), with the optimizer state the old one had. If every step
then matches, the optimizer held the wrong tensors, and the place is the job's line that
replaced them after the optimizer was built: every assignment of a module or Parameter to a
module attribute is watched once an optimizer exists, and the one whose path holds a
rebound name is reported beside the run's metrics (:data:`REPORT`).

Limits: a parameter the model gained that has no name the optimizer ever saw (a new
layer added, not a replacement) is not added; an optimizer built over a flat copy of the
parameters (DeepSpeed's ZeRO partitions) holds no module tensors and is left alone.
"""

from __future__ import annotations

import weakref
from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_frames
from .metrics_reports import BesideMetrics

REPORT = ".triage-rebind-optimizer.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)


def install() -> None:
    import torch

    from .job_objects import root_modules

    out = BesideMetrics(REPORT)
    report = out.report
    # id(optimizer) -> {id(param): (weakref to its top-level module, its name there)}
    names: dict[int, dict[int, tuple[Any, str]]] = {}
    # (weakref to a module, attribute, the job's frames) of each module/Parameter assignment
    # made once an optimizer exists
    swaps: list[tuple[Any, str, list[tuple[str, str, int, int]]]] = []
    stepped: set[int] = set()

    opt_init = torch.optim.Optimizer.__init__

    built_in: dict[int, set[tuple[str, str, int]]] = {}

    def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
        opt_init(opt, *args, **kwargs)
        built_in[id(opt)] = {f[:3] for f in job_frames(_SKIP)}
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        known: dict[int, tuple[Any, str]] = {}
        for root in root_modules():
            for n, p in root.named_parameters():
                if id(p) in held and id(p) not in known:
                    known[id(p)] = (weakref.ref(root), n)
        names[id(opt)] = known

    torch.optim.Optimizer.__init__ = __init__

    set_attr = torch.nn.Module.__setattr__

    def __setattr__(module: Any, attr: str, value: Any) -> None:
        if names and isinstance(value, (torch.nn.Module, torch.nn.Parameter)):
            frames = job_frames(_SKIP)
            if frames:
                swaps.append((weakref.ref(module), attr, frames))
        set_attr(module, attr, value)

    torch.nn.Module.__setattr__ = __setattr__

    def site_of(opt: Any, root: Any, rebound: str) -> str | None:
        """The job's line that swapped ``rebound`` out: in the function that built the
        optimizer, the call that led to the swap (a helper that swaps layers is not wrong
        by itself; calling it once the optimizer holds the old ones is); else the swap."""
        paths = {id(m): n for n, m in root.named_modules()}
        ctor = built_in.get(id(opt), set())
        for ref, attr, frames in reversed(swaps):
            owner = ref()
            if owner is None or id(owner) not in paths:
                continue
            path = f"{paths[id(owner)]}.{attr}".lstrip(".")
            if rebound == path or rebound.startswith(path + "."):
                shared = next((f for f in frames if f[:3] in ctor), frames[0])
                return f"{shared[0]}:{shared[3]}"
        return None

    def pre_step(opt: Any, args: Any, kwargs: Any) -> None:
        if id(opt) in stepped or id(opt) not in names:
            return
        stepped.add(id(opt))
        known = names[id(opt)]
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        for group in opt.param_groups:
            for i, p in enumerate(group["params"]):
                entry = known.get(id(p))
                root = entry[0]() if entry is not None else None
                if root is None:
                    continue
                now = dict(root.named_parameters()).get(entry[1])
                if now is None or now is p or id(now) in held:
                    continue
                if now.shape != p.shape or now.dtype != p.dtype:
                    continue
                group["params"][i] = now
                held.add(id(now))
                if p in opt.state:
                    opt.state[now] = opt.state.pop(p)
                report[entry[1]] = {
                    "at": site_of(opt, root, entry[1]),
                    "verb": "swaps a part of the model after the optimizer was built over "
                    "the old parameters",
                }
        out.write()

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(pre_step)
