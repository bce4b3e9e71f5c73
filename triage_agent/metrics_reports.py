"""A report an intervention writes beside the job's metrics, for the workflow to read.

Code injected into a job's process (a policy, a patch) learns what it did only there; the
workflow reads it from the run's output directory, which the process knows once the job
opens its ``MetricLog``. :class:`BesideMetrics` waits for that, and rewrites its file whole
(atomically) each time the policy has something new to say.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .import_hooks import on_import


class BesideMetrics:
    """The report file ``name`` in the directory of the job's latest ``MetricLog``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.report: dict[str, Any] = {}
        self._dirs: list[Path] = []
        module = "triage_agent.metrics"
        if module in sys.modules:
            self._on_metrics(sys.modules[module])
        else:
            on_import({module: [self._on_metrics]})

    def _on_metrics(self, metrics: Any) -> None:
        cls = metrics.MetricLog
        orig = cls.__init__
        me = self

        def __init__(log: Any, *args: Any, **kwargs: Any) -> None:
            orig(log, *args, **kwargs)
            me._dirs.append(Path(log.file).parent)
            me.write()

        cls.__init__ = __init__

    def write(self) -> None:
        """Write what the report holds now (nothing before the job opened its log)."""
        if not self._dirs or not self.report:
            return
        target = self._dirs[-1] / self.name
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.report))
        os.replace(tmp, target)


def append_event(path: str, target: str, event: str) -> None:
    """One line of the patch report: an in-process change ``target`` was installed or ran
    (``event``). One short append per write, so the processes of a job never interleave; a
    report that cannot be written leaves the job running (the workflow then reads "never
    called", which is what it can prove)."""
    line = json.dumps({"pid": os.getpid(), "target": target, "event": event})
    try:
        with open(path, "a") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


class EventsOnce:
    """:func:`append_event` once per (target, event) in this process: a change called every
    step says so once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.said: set[tuple[str, str]] = set()

    def __call__(self, target: str, event: str) -> None:
        if (target, event) not in self.said:
            self.said.add((target, event))
            append_event(self.path, target, event)
