"""The ``unique-params`` policy: an optimizer updates each parameter once per step.

A parameter listed twice among an optimizer's groups (a weight tied between two modules and
collected once per module; one list built twice and concatenated) is updated twice by every
step: torch only warns. The state capture sees it as a parameter an optimizer holds more
than once (:func:`triage_agent.module_structure.structure`).

This policy drops, as each group is added to an optimizer, every parameter the optimizer
already holds (the first listing is kept, with its group's hyper-parameters). If every step
then matches, the repeat carried the difference, and the place is where the list was made:
until the first module forward, the job's own functions are watched as they return, and the
innermost one that returned a list (or groups of lists) holding that parameter twice is
reported beside the run's metrics (:data:`REPORT`), at its return line; failing that, the
job's line that built the optimizer.

Limits: an optimizer built over a flat copy of the parameters (DeepSpeed's ZeRO) holds no
module tensors twice and is left alone; a list made in the launched script's module body
is named by the optimizer's construction line.
"""

from __future__ import annotations

from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, JobFiles, job_line, profile_until_first_forward
from .metrics_reports import BesideMetrics

REPORT = ".triage-unique-params.json"


def _tensors(value: Any) -> list[Any]:
    """The tensors a returned list holds: its items, or the ``params`` of its group dicts."""
    out: list[Any] = []
    if isinstance(value, dict) and "params" in value:
        value = value["params"]
        value = [value] if not isinstance(value, list | tuple) else value
    if not isinstance(value, list | tuple):
        return out
    for item in value:
        if isinstance(item, dict) and "params" in item:
            out += _tensors(item)
        elif hasattr(item, "data_ptr") and hasattr(item, "requires_grad"):
            out.append(item)
    return out


class _Returns:
    """Until the first forward: for each tensor some job function returned twice in one
    list, the first such function's return line (the innermost returns first)."""

    def __init__(self) -> None:
        self.job = JobFiles()
        self.twice: dict[int, str] = {}

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "return" or not isinstance(arg, list | tuple | dict):
            return
        if not self.job(frame.f_code.co_filename):
            return
        seen: set[int] = set()
        for t in _tensors(arg):
            if id(t) in seen and id(t) not in self.twice:
                self.twice[id(t)] = f"{frame.f_code.co_filename}:{frame.f_lineno}"
            seen.add(id(t))


def install() -> None:
    import torch

    from .job_objects import root_modules

    out = BesideMetrics(REPORT)
    watch = _Returns()
    profile_until_first_forward(watch.profile, lambda: None)
    original = torch.optim.Optimizer.add_param_group

    def name_of(p: Any) -> str:
        for root in root_modules():
            for n, q in root.named_parameters(remove_duplicate=False):
                if q is p:
                    return n
        return f"a {tuple(p.shape)} parameter"

    def add_param_group(opt: Any, group: dict) -> None:
        params = group.get("params")
        listed = [params] if isinstance(params, torch.Tensor) else list(params or [])
        held = {id(p) for g in getattr(opt, "param_groups", []) for p in g["params"]}
        kept, dropped = [], []
        for p in listed:
            (dropped if id(p) in held else kept).append(p)
            held.add(id(p))
        if dropped:
            group = {**group, "params": kept}
            built = job_line((TORCH, PROJECT, DEEPSPEED), depth=2)
            for p in dropped:
                name = name_of(p)
                at = watch.twice.get(id(p)) or (f"{built[0]}:{built[1]}" if built else None)
                out.report[name] = {
                    "at": at,
                    "verb": f"lists {name} a second time among the optimizer's parameters",
                }
            out.write()
        return original(opt, group)

    torch.optim.Optimizer.add_param_group = add_param_group
