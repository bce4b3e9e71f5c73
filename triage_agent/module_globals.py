"""restore-globals MOD.NAME=V: a job module's global given the other run's value where the
resumed process declares its resume.

A job that keeps training progress in a module-level variable (a curriculum's stage, a
global step a helper reads, a warm-up flag) loses it on a resume unless its checkpoint
carries it: the module is imported afresh and the variable starts from its initial value,
or a set-up function sets it again. The state capture records every plain module-level
value of the job's own modules at the step boundary; this puts the uninterrupted run's
values back when the job opens its ``MetricLog(..., resumed_from=K)``, after its own
restore and set-up and before its first resumed step. If every step then matches, those
globals carry the whole difference of the resume.

Installed by the injected bootstrap from the patch file's ``restore_globals``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def install(values: dict[str, Any], report: str, pending: dict[str, list[Any]]) -> None:
    def tell(name: str, event: str) -> None:
        try:
            with open(report, "a") as fh:
                line = {"pid": os.getpid(), "target": f"restore-globals {name}", "event": event}
                fh.write(json.dumps(line) + "\n")
        except OSError:
            pass

    def on_metrics(metrics: Any) -> None:
        cls = metrics.MetricLog
        orig = cls.__init__

        def __init__(log: Any, *args: Any, **kwargs: Any) -> None:
            orig(log, *args, **kwargs)
            if kwargs.get("resumed_from", args[2] if len(args) > 2 else None) is None:
                return
            for key, value in values.items():
                modname, _, name = key.rpartition(".")
                mod = sys.modules.get(modname)
                if mod is not None and hasattr(mod, name):
                    setattr(mod, name, value)
                    tell(key, "called")

        cls.__init__ = __init__
        for key in values:
            tell(key, "patched")

    name = "triage_agent.metrics"
    if name in sys.modules:
        on_metrics(sys.modules[name])
    else:
        pending.setdefault(name, []).append(on_metrics)
