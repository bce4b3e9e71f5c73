"""Seed pins: the seedings one line of the job makes, given other values.

Two runs whose seeding differs at the same line of the job (a seed taken from the process
id, the clock or a counter) are told apart by giving that line, in one run, the values the
other run seeded there, in order: the first seeding from the line gets the first value, and
so on. A seeding past the last value keeps its own (and the report says so). If every step
then matches, the value seeded at that line carries the whole difference.

Which line made a seeding is the innermost frame outside torch, numpy, ``random`` and this
project: the job's call, also when it seeds through a helper of a library. The seedings
caught are ``torch.manual_seed`` (and ``torch.random``'s), ``torch.Generator(...).manual_seed``
(:mod:`.generator_hooks`), ``numpy.random.seed`` and ``random.seed``.

Installed by the injected bootstrap (:func:`triage_agent.policies.apply_patches`) from the
``seeds`` of its patch file; nothing here runs in the tool's own process.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

from pydantic import BaseModel, Field

from .job_frames import NUMPY, PROJECT, TORCH, job_line

SITE_RE = r"^[^\s]+:\d+$"
_SKIP = (TORCH, NUMPY, PROJECT)


class SeedPin(BaseModel):
    """The values one line of the job seeds with, in order of its seedings."""

    site: str = Field(pattern=SITE_RE, description="file:line; the file relative to the run's cwd")
    values: list[int] = Field(min_length=1)

    @property
    def label(self) -> str:
        return f"pin-seed {self.site}"

    def matches(self, filename: str, lineno: int) -> bool:
        path, _, line = self.site.rpartition(":")
        if int(line) != lineno:
            return False
        return filename == path or filename.endswith(os.sep + path.lstrip(os.sep))


class _Pins:
    def __init__(self, pins: list[SeedPin], report: str):
        self.pins, self.report = pins, report
        self.taken = dict.fromkeys((p.site for p in pins), 0)

    def _said(self, pin: SeedPin, event: str) -> None:
        try:
            with open(self.report, "a") as fh:
                line = {"pid": os.getpid(), "target": pin.label, "event": event}
                fh.write(json.dumps(line) + "\n")
        except OSError:
            pass  # the report is the tool's, never the job's failure

    def value(self, fn: str, value: Any) -> Any:
        """The value a seeding made now is given: a pinned line's next value, else its own."""
        if not isinstance(value, int) or isinstance(value, bool):
            return value  # a state (set_state) is not pinned
        where = job_line(_SKIP)
        if where is None:
            return value
        for pin in self.pins:
            if pin.matches(*where):
                i = self.taken[pin.site]
                self.taken[pin.site] = i + 1
                if i >= len(pin.values):
                    self._said(pin, f"past the last value at seeding {i + 1} ({fn})")
                    return value
                if i == 0:
                    self._said(pin, "called")
                return pin.values[i]
        return value

    def wrap(self, owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None or getattr(fn, "_triage_pin", False):
            return

        @functools.wraps(fn)
        def seeding(*args: Any, **kwargs: Any) -> Any:
            if args:
                args = (self.value(label, args[0]), *args[1:])
            elif kwargs:
                key = next(iter(kwargs))
                kwargs[key] = self.value(label, kwargs[key])
            return fn(*args, **kwargs)

        seeding._triage_pin = True  # type: ignore[attr-defined]
        setattr(owner, name, seeding)


def install(pins: list[SeedPin], report: str, pending: dict[str, list[Any]]) -> None:
    """Wrap the seeding functions of what is imported now, and of the rest on import
    (``pending``: module name -> callbacks, run by the bootstrap's import watcher)."""
    state = _Pins(pins, report)
    for pin in pins:
        state._said(pin, "patched")
    import random

    state.wrap(random, "seed", "random.seed")

    # the callbacks get the module just executed: importing it again from inside its own
    # import would recurse through numpy's lazy attribute lookup
    def on_numpy(module: Any = None) -> None:
        nprandom = module or sys.modules["numpy.random"]
        state.wrap(nprandom, "seed", "numpy.random.seed")

    def on_torch(module: Any = None) -> None:
        from .generator_hooks import watch_generators

        torch = module or sys.modules["torch"]

        state.wrap(torch, "manual_seed", "torch.manual_seed")
        state.wrap(torch.random, "manual_seed", "torch.random.manual_seed")
        watch_generators(torch, state.value)

    for name, then in (("numpy.random", on_numpy), ("torch", on_torch)):
        if name in sys.modules:
            then()
        else:
            pending.setdefault(name, []).append(then)
