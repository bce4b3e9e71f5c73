"""The ``recompute-state`` policy: activation checkpointing's recomputation runs under the
state its forward ran under.

``torch.utils.checkpoint`` drops a block's activations after its forward and rebuilds them
by running the block again inside backward. The rebuilt activations are the forward's only
if the block computes the same thing twice: ``preserve_rng_state`` puts the generators back
for the second run, and nothing puts back what the forward itself changed (a buffer it
counts in, an attribute it advances). This policy wraps ``checkpoint`` so that each
recomputation runs with the block's modules' buffers and plain attributes, and every
generator, as they were when its forward began, and puts the current values back after it.
If every step then matches, the recomputation saw another state than its forward.

What differed is reported beside the run's metrics (:data:`REPORT`): the generators (placed
at the job's ``checkpoint`` call, which recomputes without restoring them), or each buffer
and attribute with the job's line that writes it (seen while the recomputation runs again
with the forward's values: it writes them again from the same line).

Limits: a checkpointed function that is not a module or a module's bound method is
recomputed under every live top-level module's state; state outside modules (a global
counter) is not put back.
"""

from __future__ import annotations

from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .metrics_reports import BesideMetrics

REPORT = ".triage-recompute-state.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)


def install() -> None:
    import torch.utils.checkpoint as cp

    out = BesideMetrics(REPORT)
    report = out.report

    orig = cp.checkpoint

    def checkpoint(function: Any, *args: Any, **kwargs: Any) -> Any:
        called_at = job_line(_SKIP)
        modules = _modules_of(function)
        seen: list[dict[str, Any]] = []

        def run(*a: Any, **k: Any) -> Any:
            if not seen:
                seen.append(_state(modules))
                return function(*a, **k)
            now = _state(modules)
            differ = _differ(seen[0], now)
            _put(modules, seen[0])
            sites = _WriteSites(modules, differ)
            try:
                with sites:
                    return function(*a, **k)
            finally:
                # also when the recomputation stops early (torch raises once it has rebuilt
                # what backward needs)
                _put(modules, now)
                if differ:
                    _said(report, differ, sites.lines, called_at)
                    out.write()

        return orig(run, *args, **kwargs)

    cp.checkpoint = checkpoint


def _modules_of(function: Any) -> list[Any]:
    import torch

    from .job_objects import root_modules

    owner = (
        function if isinstance(function, torch.nn.Module) else getattr(function, "__self__", None)
    )
    if isinstance(owner, torch.nn.Module):
        return [owner]
    return list(root_modules())


def _state(modules: list[Any]) -> dict[str, Any]:
    """Buffers (cloned), plain attributes and every generator, by a name within the block."""
    from .rng_streams import rng_snapshot

    out: dict[str, Any] = {"rng": rng_snapshot()}
    for k, root in enumerate(modules):
        for name, m in root.named_modules():
            for b, t in m.named_buffers(recurse=False):
                if t is not None:
                    out[f"{k}:{name}.{b}".replace(":.", ":")] = t.detach().clone()
            for a, v in vars(m).items():
                if not a.startswith("_") and a != "training" and type(v) in (int, float, bool):
                    out[f"{k}:{name}.{a}".replace(":.", ":") + "@attr"] = v
    return out


def _same(a: Any, b: Any) -> bool:
    import torch

    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    return type(a) is type(b) and a == b


def _rng_same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    import numpy as np
    import torch

    for key in a.keys() | b.keys():
        x, y = a.get(key), b.get(key)
        if key == "numpy":
            if x is None or y is None or x[2:] != y[2:] or not np.array_equal(x[1], y[1]):
                return False
        elif key in ("torch_cpu",):
            if not torch.equal(x, y):
                return False
        elif key == "torch_cuda":
            if len(x) != len(y) or not all(torch.equal(p, q) for p, q in zip(x, y, strict=True)):
                return False
        elif x != y:
            return False
    return True


def _differ(then: dict[str, Any], now: dict[str, Any]) -> list[str]:
    out = [] if _rng_same(then["rng"], now["rng"]) else ["rng"]
    out += [k for k in then if k != "rng" and k in now and not _same(then[k], now[k])]
    return out


def _put(modules: list[Any], state: dict[str, Any]) -> None:
    import torch

    from .rng_streams import rng_restore

    rng_restore(state["rng"])
    for key, value in state.items():
        if key == "rng":
            continue
        k, _, path = key.partition(":")
        path = path.removesuffix("@attr")
        owner_name, _, leaf = path.rpartition(".")
        root = modules[int(k)]
        owner = root.get_submodule(owner_name) if owner_name else root
        if key.endswith("@attr"):
            object.__setattr__(owner, leaf, value)
            continue
        live = getattr(owner, leaf, None)
        if torch.is_tensor(live) and live.shape == value.shape and live.dtype == value.dtype:
            with torch.no_grad():
                live.copy_(value)


class _WriteSites:
    """While the recomputation runs with the forward's values: the job's line that writes
    each differing buffer (an in-place op on its storage) or attribute (a module setattr)."""

    def __init__(self, modules: list[Any], differ: list[str]) -> None:
        self.modules, self.differ = modules, differ
        self.lines: dict[str, str] = {}

    def __enter__(self) -> _WriteSites:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        storages: dict[int, str] = {}
        attrs: dict[tuple[int, str], str] = {}
        for key in self.differ:
            if key == "rng":
                continue
            k, _, path = key.partition(":")
            plain = path.removesuffix("@attr")
            owner_name, _, leaf = plain.rpartition(".")
            root = self.modules[int(k)]
            owner = root.get_submodule(owner_name) if owner_name else root
            if key.endswith("@attr"):
                attrs[(id(owner), leaf)] = plain
            else:
                t = getattr(owner, leaf, None)
                if torch.is_tensor(t):
                    storages[t.untyped_storage().data_ptr()] = plain
        lines = self.lines

        def mark(name: str) -> None:
            at = job_line(_SKIP, depth=3)
            if at is not None:
                lines.setdefault(name, f"{at[0]}:{at[1]}")

        class Writes(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                kwargs = kwargs or {}
                for arg, value in zip(func._schema.arguments, args, strict=False):
                    info = arg.alias_info
                    if info is not None and info.is_write and torch.is_tensor(value):
                        name = storages.get(value.untyped_storage().data_ptr())
                        if name is not None:
                            mark(name)
                return func(*args, **kwargs)

        module_cls = torch.nn.Module
        self._setattr = module_cls.__setattr__
        orig_setattr = self._setattr

        def __setattr__(m: Any, name: str, value: Any) -> None:
            plain = attrs.get((id(m), name))
            if plain is not None:
                mark(plain)
            orig_setattr(m, name, value)

        self._mode = Writes() if storages else None
        if attrs:
            module_cls.__setattr__ = __setattr__
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        if self._mode is not None:
            self._mode.__exit__(*exc)
        torch.nn.Module.__setattr__ = self._setattr


def _said(report: dict[str, Any], differ: list[str], lines: dict[str, str], called_at: Any) -> None:
    for key in differ:
        if key == "rng":
            name = "generators"
            at = f"{called_at[0]}:{called_at[1]}" if called_at else None
            verb = "recomputes without the generators its forward drew from"
        else:
            name = key.partition(":")[2].removesuffix("@attr")
            at = lines.get(name)
            verb = f"writes {name} in the forward, and the recomputation reads the written value"
        report.setdefault(name, {"at": at, "verb": verb})
        if report[name]["at"] is None and at is not None:
            report[name]["at"] = at
