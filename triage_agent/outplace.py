"""Out-of-place lines: the in-place torch calls one line of the job makes, run out of place.

A fast path that writes over a tensor in place (``F.relu(x, inplace=True)``, ``x.add_(y)``,
``x += y``) while another name still holds that tensor (a shortcut, a saved input) computes
something else than the plain path. Running the line's in-place calls out of place (the
result returned as before, the tensor it was called on left alone) tests exactly that: if
every step then matches, the write at that line is what changed the bits.

A torch function mode (entered in every process at torch import, by the injected bootstrap)
sees each torch call with the job's line that made it: the innermost frame outside torch and
this project. Calls from other lines pass through untouched.
"""

from __future__ import annotations

import sys
from typing import Any

from .job_frames import PROJECT, TORCH, at_site, job_line
from .metrics_reports import EventsOnce

_SKIP = (TORCH, PROJECT)


# in-place by name, and yet no write to the values: flags and sharing
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "detach_", "retain_grad_"})


def is_in_place(func: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a torch call writes into its first argument (``x.fill_(v)``, ``x += y``,
    ``F.relu(x, inplace=True)``), whether or not it has an out-of-place twin."""
    if kwargs.get("inplace") is True:
        return True
    name = getattr(func, "__name__", "")
    if name in _NOT_WRITES:
        return False
    return (name.startswith("__i") and name.endswith("__")) or (
        name.endswith("_") and not name.endswith("__")
    )


def out_of_place(func: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    """The out-of-place form of an in-place call, or None when it has none."""
    if kwargs.get("inplace") is True:
        return func, {**kwargs, "inplace": False}
    import torch

    name = getattr(func, "__name__", "")
    if name.startswith("__i") and name.endswith("__"):  # x += y: Python rebinds x to the result
        plain = getattr(torch.Tensor, "__" + name[3:], None)
        return (plain, kwargs) if plain is not None else None
    if name.endswith("_") and not name.endswith("__"):
        for owner in (torch.Tensor, torch, torch.nn.functional):
            plain = getattr(owner, name[:-1], None)
            if plain is not None and getattr(owner, name, None) is func:
                return plain, kwargs
    return None


def install(sites: list[str], report: str, pending: dict[str, list[Any]]) -> None:
    """Run the in-place calls of ``sites`` (file:line) out of place, in this process."""
    tell = EventsOnce(report)

    def on_torch(module: Any = None) -> None:
        torch = module or sys.modules["torch"]
        from torch.overrides import TorchFunctionMode

        class OutOfPlace(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                kwargs = kwargs or {}
                swap = out_of_place(func, kwargs)
                if swap is not None and swap[0] is not None:
                    where = job_line(_SKIP)
                    for site in sites:
                        if where is not None and at_site(site, where):
                            tell(f"outplace {site}", "called")
                            return swap[0](*args, **swap[1])
                return func(*args, **kwargs)

        OutOfPlace().__enter__()  # for the life of the process; never left
        for site in sites:
            tell(f"outplace {site}", "patched")
        del torch

    if "torch" in sys.modules:
        on_torch()
    else:
        pending.setdefault("torch", []).append(on_torch)
