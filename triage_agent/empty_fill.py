"""``fill-empty FILE:LINE``: the tensors a line of the job allocates without initialising
(``torch.empty``, ``empty_like``, ``new_empty``, ``empty_strided``) are zeroed.

Memory from ``empty`` holds whatever the allocator last left there: another tensor's bytes,
a freed buffer, anything a previous allocation in this process wrote. A job that reads it
before writing every element (an accumulator started from ``empty`` instead of ``zeros``)
computes with bytes that differ from one process to the next, so a run and its repeat part
with no declared difference. Zeroing what that line allocates, in both runs, and every step
matching, proves the line reads memory it never wrote.

Installed by the injected bootstrap from the patch file's ``fill_empty``; the report says
which lines allocated, as the other in-process changes' do.
"""

from __future__ import annotations

import sys
from typing import Any

from .job_frames import PROJECT, TORCH, at_site, job_line
from .metrics_reports import EventsOnce

_SKIP = (TORCH, PROJECT)
_EMPTY = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def install(sites: list[str], report: str, pending: dict[str, list[Any]]) -> None:
    """Zero what ``sites`` (file:line) allocate uninitialised, in this process."""
    tell = EventsOnce(report)

    def on_torch(module: Any = None) -> None:
        from torch.overrides import TorchFunctionMode

        class FillEmpty(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                out = func(*args, **(kwargs or {}))
                if getattr(func, "__name__", "") in _EMPTY:
                    where = job_line(_SKIP)
                    for site in sites:
                        if where is not None and at_site(site, where):
                            tell(f"fill-empty {site}", "called")
                            out.zero_()
                return out

        FillEmpty().__enter__()  # for the life of the process; never left
        for site in sites:
            tell(f"fill-empty {site}", "patched")

    if "torch" in sys.modules:
        on_torch()
    else:
        pending.setdefault("torch", []).append(on_torch)
