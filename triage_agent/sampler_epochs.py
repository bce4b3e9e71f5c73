"""The ``advance-epochs`` policy: each pass over a data loader advances its sampler's epoch.

A sampler that shuffles by epoch (``DistributedSampler`` and its kind: a ``set_epoch`` and
an ``epoch``) draws each pass's order from a generator seeded with its seed plus its epoch.
A loop that never calls ``set_epoch``, or calls it after the pass's iterator exists, visits
every epoch in the first one's order: a second pass differs from a run that advances it,
with no error. The state capture sees the sampler's epoch in each loader's position
(:func:`triage_agent.job_objects.cursor_state`).

This policy watches each pass over a ``DataLoader`` begin: when its sampler's epoch is where
it was when the previous pass began, it is advanced by one first. If every step then
matches, the unadvanced epoch carried the difference, and the place is the job's line that
began the pass without advancing it, reported beside the run's metrics (:data:`REPORT`).

Limits: a sampler whose epoch the job sets to something other than the count of its passes
(an epoch resumed from a checkpoint, a pass that is not an epoch) is advanced by one from
wherever the job left it.
"""

from __future__ import annotations

from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .metrics_reports import BesideMetrics

REPORT = ".triage-advance-epochs.json"


def install() -> None:
    import torch

    out = BesideMetrics(REPORT)
    began: dict[int, int] = {}  # id(sampler) -> its epoch when the previous pass began
    original = torch.utils.data.DataLoader.__iter__

    def __iter__(loader: Any) -> Any:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch") and isinstance(getattr(sampler, "epoch", None), int):
            key = id(sampler)
            if key in began and sampler.epoch == began[key]:
                sampler.set_epoch(sampler.epoch + 1)
                name = type(sampler).__name__
                if name not in out.report:
                    where = job_line((TORCH, PROJECT, DEEPSPEED), depth=2)
                    out.report[name] = {
                        "at": f"{where[0]}:{where[1]}" if where else None,
                        "verb": f"begins another pass over the loader without advancing its "
                        f"{name}'s epoch",
                    }
                    out.write()
            began[key] = sampler.epoch
        return original(loader)

    torch.utils.data.DataLoader.__iter__ = __iter__
