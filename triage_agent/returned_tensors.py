"""``copy-returns``: a function's returned tensors handed out as copies.

A function that caches a tensor and returns the cached object itself (a table built once,
a batch kept for reuse) shares it with every caller: a caller that writes into what it got
(``mul_``, ``add_``, an in-place activation) changes what every later call returns, with no
error. Copying what the function returns leaves the cache as it was built. If every step
then matches, handing out the shared tensor carried the difference.

The report beside the run's metrics (:data:`REPORT`) names the function's return line: the
one that returned a tensor object it had already returned on an earlier call, else the last
line it returned from.

Limits: tensors inside a dict or an object are not copied (a tuple or a list of them is); a
tensor that requires grad is copied with ``clone``, so gradients still reach the original.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .job_frames import returned_from
from .metrics_reports import BesideMetrics

REPORT = ".triage-copy-returns.json"
_OUT: list[BesideMetrics] = []


def _report() -> BesideMetrics:
    if not _OUT:
        _OUT.append(BesideMetrics(REPORT))
    return _OUT[0]


def copying(original: Callable[..., Any], target: str) -> Callable[..., Any]:
    import torch

    _report()  # before the job opens its log: the report is written beside it
    code = getattr(getattr(original, "__func__", original), "__code__", None)
    seen: dict[int, Any] = {}  # id -> the tensor returned (kept alive: ids stay unique)

    def copy(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.clone()
        if isinstance(v, tuple | list):
            return type(v)(copy(x) for x in v)
        return v

    def tensors(v: Any) -> list[Any]:
        if isinstance(v, torch.Tensor):
            return [v]
        if isinstance(v, tuple | list):
            return [t for x in v for t in tensors(x)]
        return []

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value, at = returned_from(original, args, kwargs, lambda c: c is code)
        found = tensors(value)
        if found:
            out = _report()
            again = any(seen.get(id(t)) is t for t in found)
            said = out.report.get(target)
            if at and (said is None or (again and not said.get("again"))):
                out.report[target] = {
                    "at": at,
                    "again": again,
                    "verb": "hands out the tensor object it returned on an earlier call: a "
                    "caller's in-place write reaches every later caller"
                    if again
                    else "returns the tensor its callers then change",
                }
                out.write()
            for t in found:
                if len(seen) < 256:
                    seen.setdefault(id(t), t)
        return copy(value)

    return wrapped
