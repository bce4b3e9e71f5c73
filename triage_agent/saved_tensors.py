"""The ``keep-saved`` policy: a backward reads the values its forward saved, whatever was
written over them since.

Autograd saves tensors for the backward (an input of ``pow``, an activation's output) and
checks, by the tensor's version counter, that nothing wrote over them before the backward
reads them. A write that bypasses the counter (through ``.data``, under ``no_grad`` on a
detached alias, from numpy or a custom kernel) raises nothing: the backward silently
computes with the overwritten values. That is a defect wherever it happens, and the forward
looks the same.

This policy keeps a copy of every saved tensor when autograd saves it
(``torch.autograd.graph.saved_tensors_hooks``) and hands the backward the copy. If every
step then matches the other run, a write over a saved tensor carries the whole difference.
It also watches the in-place torch calls the job makes (a torch function mode) and, when a
backward finds a saved tensor's original changed, reports the job's lines that wrote into
that tensor's storage while it was saved, and the line whose op saved it (:data:`REPORT`,
beside the run's metrics). A write no torch call made (numpy through a shared buffer) is
reported as unseen.

Only in a rerun that tests it: the copies cost memory and a copy per saved tensor.
"""

from __future__ import annotations

import weakref
from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .metrics_reports import BesideMetrics
from .outplace import is_in_place

REPORT = ".triage-keep-saved.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)


def _storage(t: Any) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None  # a tensor without storage (sparse, a meta or functional wrapper)


class _Saved:
    """What the graph holds for one saved tensor: the copy, and the original to compare."""

    __slots__ = ("__weakref__", "copy", "original", "ptr", "saved_at")

    def __init__(self, t: Any, saved_at: str | None) -> None:
        self.copy = t.detach().clone()
        # a detached alias: it sees later writes to the storage, and holds no graph (the
        # tensor itself would hold its grad_fn, which holds this: a cycle no GC can see)
        self.original = t.detach()
        self.ptr = _storage(t)
        self.saved_at = saved_at


def install() -> None:
    import torch
    from torch.overrides import TorchFunctionMode

    out = BesideMetrics(REPORT)
    report = out.report
    live: dict[int, int] = {}  # storage pointer -> how many saved tensors use it now
    writes: dict[int, dict[str, int]] = {}  # storage pointer -> the job's lines that wrote it
    quiet = [0]

    def forget(ptr: int | None) -> None:
        if ptr is None or ptr not in live:
            return
        live[ptr] -= 1
        if live[ptr] <= 0:
            del live[ptr]
            writes.pop(ptr, None)

    def pack(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            return t
        quiet[0] += 1
        try:
            where = job_line(_SKIP)
            saved = _Saved(t, f"{where[0]}:{where[1]}" if where else None)
        finally:
            quiet[0] -= 1
        if saved.ptr is not None:
            live[saved.ptr] = live.get(saved.ptr, 0) + 1
            weakref.finalize(saved, forget, saved.ptr)
        return saved

    def unpack(saved: Any) -> Any:
        if not isinstance(saved, _Saved):
            return saved
        original = saved.original
        if saved.ptr is not None:
            quiet[0] += 1
            try:
                changed = not torch.equal(original.detach(), saved.copy)
            except RuntimeError:
                changed = False
            finally:
                quiet[0] -= 1
            if changed:
                note(saved)
        return saved.copy

    def note(saved: _Saved) -> None:
        lines = writes.get(saved.ptr or -1) or {}
        key = ",".join(sorted(lines)) or "unseen"
        entry = report.setdefault(
            key,
            {
                "at": sorted(lines, key=lambda w: -lines[w])[0] if lines else None,
                "writers": sorted(lines),
                "saved_at": saved.saved_at,
                "times": 0,
                "verb": "writes over a tensor autograd saved for the backward, past its "
                "version counter"
                if lines
                else "a tensor saved for the backward changed, and no torch call of the job "
                "wrote it",
            },
        )
        entry["times"] += 1
        if entry["times"] == 1:
            out.write()

    class WritesIntoSaved(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            kwargs = kwargs or {}
            if (
                live
                and not quiet[0]
                and args
                and isinstance(args[0], torch.Tensor)
                and is_in_place(func, kwargs)
                and (ptr := _storage(args[0])) in live
                and (where := job_line(_SKIP)) is not None
            ):
                site = f"{where[0]}:{where[1]}"
                seen = writes.setdefault(ptr, {})
                seen[site] = seen.get(site, 0) + 1
            return func(*args, **kwargs)

    torch.autograd.graph.saved_tensors_hooks(pack, unpack).__enter__()  # for the process's life
    WritesIntoSaved().__enter__()
