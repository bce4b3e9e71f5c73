"""restore-state PART[,PART]: training state a resume did not bring back, put back.

Parts are named as the state capture names them (:func:`triage_agent.boundary_capture.state_now`):

- ``modelK`` (K >= 1): the K-th top-level module by size after the largest, the ``model``
  (a teacher, an EMA copy, a second network);
- ``optimizer``: every optimizer's per-parameter state, keyed by the parameter's name in
  the job's modules, not by its position: a resume that rebuilds the optimizer over the
  parameters in another order attaches the saved moments to other tensors, and only the
  names tell.

The process that saves writes the parts at each step the job logs (``MetricLog.log``); a
process that resumes from step K (``MetricLog(..., resumed_from=K)``) puts them back at its
first module forward, after whatever its own restore did, and reports what it put back and
the job's line that last loaded each part (``load_state_dict``), for the evidence to name.
If every step then matches, the part carries the whole difference of the resume.

Installed by the injected bootstrap from the patch file's ``restore_state``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from .import_hooks import on_import
from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .job_objects import by_param, live_objects, param_names, root_modules

PART_RE = r"^(model[1-9]|optimizer)$"
FILE = ".triage-state-step{step}-rank{rank}.pt"
REPORT = ".triage-state-restored.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)


def install(parts: list[str], report: str, pending: dict[str, list[Any]]) -> None:
    """Save ``parts`` at each logged step and put them back after a resume, in this process
    (``pending``: module name -> callbacks, run by the bootstrap's import watcher)."""
    loaded: dict[int, str] = {}  # id(object) -> the job's line that last loaded its state
    with open(report, "a") as fh:
        for part in parts:
            line = {"pid": os.getpid(), "target": f"restore-state {part}", "event": "patched"}
            fh.write(json.dumps(line) + "\n")

    def on_torch(module: Any = None) -> None:
        torch = module or sys.modules["torch"]
        for cls in (torch.nn.Module, torch.optim.Optimizer):
            watch_loads(cls)
        name = "triage_agent.metrics"
        if name in sys.modules:
            on_metrics(sys.modules[name])
        else:
            on_import({name: [on_metrics]})

    def watch_loads(cls: Any) -> None:
        orig = cls.load_state_dict

        def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
            where = job_line(_SKIP)
            if where is not None:
                loaded[id(self)] = f"{where[0]}:{where[1]}"
            return orig(self, *args, **kwargs)

        cls.load_state_dict = load_state_dict

    def ordered_roots() -> list[Any]:
        return sorted(root_modules(), key=lambda m: -sum(p.numel() for p in m.parameters()))

    def snapshot() -> dict[str, Any]:
        import torch

        roots = ordered_roots()
        snap: dict[str, Any] = {}
        for part in parts:
            if part == "optimizer":
                snap[part] = {
                    n: {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in st.items()}
                    for n, st in by_param(roots, live_objects(torch.optim.Optimizer)).items()
                }
            elif int(part[5:]) < len(roots):
                snap[part] = {
                    k: v.detach().clone() for k, v in roots[int(part[5:])].state_dict().items()
                }
        return snap

    def put_back(snap: dict[str, Any]) -> dict[str, Any]:
        import torch

        roots = ordered_roots()
        said: dict[str, Any] = {}
        for part, saved in snap.items():
            if part == "optimizer":
                names = param_names(roots)
                opts = live_objects(torch.optim.Optimizer)
                n = 0
                for opt in opts:
                    for group in opt.param_groups:
                        for p in group["params"]:
                            if names.get(id(p)) in saved:
                                opt.state[p] = dict(saved[names[id(p)]])
                                n += 1
                at = next((loaded[id(o)] for o in opts if id(o) in loaded), None)
                said[part] = {"what": f"{n} parameters' optimizer state, by name", "loaded_at": at}
            else:
                k = int(part[5:])
                if k < len(roots):
                    at = loaded.get(id(roots[k]))  # the job's load, before this one
                    roots[k].load_state_dict(saved)
                    said[part] = {
                        "what": f"{type(roots[k]).__name__} ({len(saved)} tensors)",
                        "loaded_at": at,
                    }
        return said

    def on_metrics(metrics: Any) -> None:
        import torch

        cls = metrics.MetricLog
        if getattr(cls.log, "_triage_restore_state", False):
            return
        orig_init, orig_log = cls.__init__, cls.log

        def at(log: Any, step: int) -> str:
            return str(log.file.parent / FILE.format(step=step, rank=log.rank))

        def __init__(log: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(log, *args, **kwargs)
            resumed = kwargs.get("resumed_from", args[2] if len(args) > 2 else None)
            if resumed is None or not os.path.exists(at(log, resumed)):
                return
            snap = torch.load(at(log, resumed), weights_only=False)
            out = str(log.file.parent / REPORT)
            handle: list[Any] = []

            def first_forward(module: Any, inputs: Any) -> None:
                if not handle:  # a teacher's forward under no_grad counts: it reads the part
                    return
                handle.pop().remove()
                said = put_back(snap)
                with open(out, "w") as fh:
                    json.dump(said, fh)
                with open(report, "a") as fh:
                    for part in said:
                        line = {
                            "pid": os.getpid(),
                            "target": f"restore-state {part}",
                            "event": "called",
                        }
                        fh.write(json.dumps(line) + "\n")

            handle.append(torch.nn.modules.module.register_module_forward_pre_hook(first_forward))

        def log_step(log: Any, step: int, *args: Any, **kwargs: Any) -> Any:
            result = orig_log(log, step, *args, **kwargs)
            torch.save(snapshot(), at(log, step))
            return result

        log_step._triage_restore_state = True  # type: ignore[attr-defined]
        cls.__init__, cls.log = __init__, log_step

    if "torch" in sys.modules:
        on_torch()
    else:
        pending.setdefault("torch", []).append(on_torch)
