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

import json
import os
import sys
import weakref
from pathlib import Path
from typing import Any

from .import_hooks import on_import
from .job_frames import DEEPSPEED, PROJECT, TORCH

REPORT = ".triage-rebind-optimizer.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)


def install() -> None:
    import torch

    from .job_objects import root_modules

    report: dict[str, Any] = {}
    where: list[Path] = []
    # id(optimizer) -> {id(param): (weakref to its top-level module, its name there)}
    names: dict[int, dict[int, tuple[Any, str]]] = {}
    # (weakref to a module, attribute, the job's frames) of each module/Parameter assignment
    # made once an optimizer exists
    swaps: list[tuple[Any, str, list[tuple[str, str, int, int]]]] = []
    stepped: set[int] = set()

    def on_metrics(metrics: Any) -> None:
        cls = metrics.MetricLog
        orig = cls.__init__

        def __init__(log: Any, *args: Any, **kwargs: Any) -> None:
            orig(log, *args, **kwargs)
            where.append(Path(log.file).parent)
            _write(where, report)

        cls.__init__ = __init__

    name = "triage_agent.metrics"
    if name in sys.modules:
        on_metrics(sys.modules[name])
    else:
        on_import({name: [on_metrics]})

    opt_init = torch.optim.Optimizer.__init__

    built_in: dict[int, set[tuple[str, str, int]]] = {}

    def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
        opt_init(opt, *args, **kwargs)
        built_in[id(opt)] = {f[:3] for f in _job_frames()}
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
            frames = _job_frames()
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
        _write(where, report)

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(pre_step)


def _job_frames() -> list[tuple[str, str, int, int]]:
    """(file, function, its first line, the line) of each frame of the job's own code above
    the caller, innermost first."""
    out = []
    f = sys._getframe(2)
    while f is not None:
        co = f.f_code
        if not any(s in co.co_filename for s in _SKIP):
            out.append((co.co_filename, co.co_name, co.co_firstlineno, f.f_lineno))
        f = f.f_back
    return out


def _write(where: list[Path], report: dict[str, Any]) -> None:
    if not where or not report:
        return
    target = where[-1] / REPORT
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report))
    os.replace(tmp, target)
