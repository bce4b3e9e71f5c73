"""``tie-params NAME=NAME[=...][;...]``: the named parameters made one tensor before any
optimizer takes them.

A weight one run shares between two modules (an output projection tied to the token
embedding) and the other run builds twice, the second a copy of the first's values, starts
from the same bytes and trains apart: each copy gets only its own module's gradient. The
state capture sees it at initialisation: one run's model ties the names, the other's holds
as many parameters of its own, each with the tied tensor's bytes
(:func:`triage_agent.workflow.boundary_state.tie_arms`).

This policy, in the run that holds them apart, rebinds every named parameter but the first
to the first's tensor on the module that holds it, as the first optimizer is built (or as
``deepspeed.initialize`` is entered, whichever comes first), so the optimizer and the
forward see one tensor. If every step then matches, the missing tie carries the difference,
and the place is where the run built the parameter it should have shared: the job's line
that constructed the module holding it, reported beside the run's metrics (:data:`REPORT`).

Limits: an optimizer handed a list of parameters made before the tie keeps the dropped
tensor (it never gets a gradient); names are the model's own (a wrapper's prefix left out).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .metrics_reports import BesideMetrics, append_event

REPORT = ".triage-tie-params.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)
_BUILT = "_triage_built_at"
_ORDER = "_triage_built_n"


def _owner(root: Any, name: str) -> Any:
    owner_name = name.rpartition(".")[0]
    return root.get_submodule(owner_name) if owner_name else root


def _tie(roots: list[Any], groups: list[list[str]], out: BesideMetrics) -> bool:
    """Tie each group in the first root that holds all its names; whether any was tied."""
    done = False
    for names in groups:
        for root in roots:
            try:
                held = [(n, root.get_parameter(n), _owner(root, n)) for n in names]
            except (AttributeError, TypeError):
                continue
            # the module built first holds the original; the later ones were made from it
            held.sort(key=lambda h: h[2].__dict__.get(_ORDER, float("inf")))
            first, keep, _ = held[0]
            for name, p, owner in held[1:]:
                if p is keep:
                    continue
                setattr(owner, name.rpartition(".")[2], keep)
                built = owner.__dict__.get(_BUILT)
                out.report[name] = {
                    "at": built,
                    "verb": f"builds {name} as a parameter of its own, initialised from "
                    f"{first}'s values, where the other run shares one tensor between "
                    f"{' and '.join(names)}",
                }
            done = True
            break
    out.write()
    return done


def install(groups_text: list[str], report: str, pending: dict[str, list[Any]]) -> None:
    groups = [g.split("=") for gt in groups_text for g in gt.split(";") if "=" in g]
    out = BesideMetrics(REPORT)
    state = {"tied": False}
    built = [0]

    def tie_now(roots: list[Any]) -> None:
        if state["tied"]:
            return
        state["tied"] = _tie(roots, groups, out)
        if state["tied"]:
            for gt in groups_text:
                append_event(report, f"tie-params {gt}", "called")

    def on_torch(module: Any = None) -> None:
        torch = module or sys.modules["torch"]
        from .job_objects import root_modules

        init = torch.nn.Module.__init__

        @functools.wraps(init)
        def module_init(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            if _ORDER in self.__dict__:
                return
            where = job_line(_SKIP)
            built[0] += 1
            self.__dict__[_ORDER] = built[0]
            if where is not None:
                self.__dict__[_BUILT] = f"{where[0]}:{where[1]}"

        torch.nn.Module.__init__ = module_init
        opt_init = torch.optim.Optimizer.__init__

        @functools.wraps(opt_init)
        def optimizer_init(self: Any, params: Any, *args: Any, **kwargs: Any) -> None:
            tie_now(root_modules())
            opt_init(self, params, *args, **kwargs)

        torch.optim.Optimizer.__init__ = optimizer_init

    def on_deepspeed(module: Any = None) -> None:
        ds = module or sys.modules["deepspeed"]
        from .job_objects import root_modules

        initialize = ds.initialize

        @functools.wraps(initialize)
        def ds_initialize(*args: Any, **kwargs: Any) -> Any:
            model = kwargs.get("model")
            tie_now([model] if model is not None else root_modules())
            return initialize(*args, **kwargs)

        ds.initialize = ds_initialize

    for gt in groups_text:
        append_event(report, f"tie-params {gt}", "patched")
    for name, hook in (("torch", on_torch), ("deepspeed", on_deepspeed)):
        if name in sys.modules:
            hook()
        else:
            pending.setdefault(name, []).append(hook)


__all__ = ["REPORT", "install"]
