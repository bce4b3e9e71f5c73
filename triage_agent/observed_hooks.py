"""The ``observe-hooks`` policy: a module's forward hooks observe and change nothing.

A forward hook that returns something other than None replaces the module's output (a
forward pre-hook, its input). A hook written to record statistics that ends with
``return act`` (a detached, clamped or cast copy it computed them from) changes what the
model computes, with no error. The state capture sees the hooks one run's modules hold and
the other's do not (:func:`triage_agent.module_structure.structure`).

This policy wraps every forward hook and forward pre-hook the job registers on a module from
start-up: the hook runs as it is, and what it returns is dropped, so the module's input and
output stand. If every step then matches, a hook's return value carried the difference, and
the place is the hook's own line that returned it (the outermost return in the job's files
while the hook runs), reported beside the run's metrics (:data:`REPORT`).

Limits: hooks registered before start-up (none: the job has not run) or through the global
``register_module_forward_hook`` are left alone; a hook's writes into the tensors it is
handed are not undone (``isolate-writes`` of the hook tests those).
"""

from __future__ import annotations

import functools
from typing import Any

from .job_frames import JobFiles, returned_from
from .metrics_reports import BesideMetrics

REPORT = ".triage-observe-hooks.json"


def install() -> None:
    import torch

    out = BesideMetrics(REPORT)
    job = JobFiles()

    def observing(hook: Any, kind: str) -> Any:
        name = getattr(getattr(hook, "func", hook), "__qualname__", repr(hook))

        @functools.wraps(hook)
        def observe(*args: Any, **kwargs: Any) -> None:
            value, at = returned_from(hook, args, kwargs, lambda code: job(code.co_filename))
            if value is not None and name not in out.report:
                out.report[name] = {
                    "at": at,
                    "verb": f"returns a value from a forward {kind}hook, which replaces the "
                    f"module's {'input' if kind else 'output'}",
                }
                out.write()

        return observe

    Module = torch.nn.Module
    forward_hook, pre_hook = Module.register_forward_hook, Module.register_forward_pre_hook

    def register_forward_hook(module: Any, hook: Any, *args: Any, **kwargs: Any) -> Any:
        return forward_hook(module, observing(hook, ""), *args, **kwargs)

    def register_forward_pre_hook(module: Any, hook: Any, *args: Any, **kwargs: Any) -> Any:
        return pre_hook(module, observing(hook, "pre-"), *args, **kwargs)

    Module.register_forward_hook = register_forward_hook
    Module.register_forward_pre_hook = register_forward_pre_hook
