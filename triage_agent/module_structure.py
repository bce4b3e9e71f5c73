"""The training state no ``state_dict`` holds: which modules are in eval mode, which parameter
names share one tensor, which parameters no optimizer holds, and the gradients accumulated so
far, how many hooks each module and parameter holds, and the buffers a module registers
outside its state_dict (``persistent=False``). Two runs can agree on every
tensor's bytes and still train differently on any of them (a helper that leaves the model in
eval mode stops its dropout; a restore that gives a tied head a Parameter of its own trains
two tensors where there was one; a checkpoint taken inside an accumulation window loses the
part of the window already summed; a resume that registers a gradient hook again applies it
twice; a running statistic the forward updates, registered non-persistent, starts again from
its initial value after a resume).

Read by the state capture (what differs), and put back by restore-state (proof that it
carries the difference). Runs inside the job's processes: nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

# the hook tables of a module and of a tensor, in registration order (each a dict keyed by
# its handle's id): what a hook count reads and what removing a hook pops
MODULE_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
TENSOR_HOOKS = ("_backward_hooks", "_post_accumulate_grad_hooks")


def hook_tables(root: Any) -> dict[str, Any]:
    """'NAME:TABLE' -> the hook table of each module and parameter that holds a hook."""
    out: dict[str, Any] = {}
    for name, m in root.named_modules():
        for attr in MODULE_HOOKS:
            if getattr(m, attr, None):
                out[f"{name or '<root>'}:{attr.strip('_')}"] = getattr(m, attr)
    for name, p in root.named_parameters():
        for attr in TENSOR_HOOKS:
            if getattr(p, attr, None):
                out[f"{name}:tensor{attr}"] = getattr(p, attr)
    return out


def _scaling() -> str:
    """The loss scale of each live, enabled GradScaler that scales (gradients are multiplied
    by it until unscaled), or ''."""
    import sys

    amp = sys.modules.get("torch.amp.grad_scaler")
    if amp is None:
        return ""
    from .job_objects import live_objects

    scales = []
    for s in live_objects(amp.GradScaler):
        try:
            if s.is_enabled() and s.get_scale() != 1.0:
                scales.append(f"scale={s.get_scale()}")
        except Exception:  # noqa: BLE001 - a scaler not yet set up says nothing
            continue
    return ",".join(scales)


def structure(root: Any, optimizers: list[Any]) -> dict[str, str]:
    """Modules in eval mode, parameters frozen (``requires_grad`` off), names that share a
    parameter, parameters no optimizer holds (only when the job has an optimizer that holds
    the module's own tensors), and how many hooks each module and parameter holds."""
    eval_modules = sorted(name or "<root>" for name, m in root.named_modules() if not m.training)
    frozen = sorted(n for n, p in root.named_parameters() if not p.requires_grad)
    groups: dict[int, list[str]] = {}
    for name, p in root.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    held = {id(p) for o in optimizers for g in o.param_groups for p in g["params"]}
    out = {
        "eval_modules": ",".join(eval_modules),
        "frozen": ",".join(frozen),
        "tied": ";".join(sorted("=".join(names) for names in groups.values() if len(names) > 1)),
        "hooks": ",".join(f"{k}={len(t)}" for k, t in sorted(hook_tables(root).items())),
    }
    scaling = _scaling()
    if scaling:
        out["grad_scaler"] = scaling
    if held & set(groups):
        outside = sorted(names[0] for pid, names in groups.items() if pid not in held)
        out["outside_optimizer"] = ",".join(outside)
        # a parameter an optimizer lists twice is updated twice by each step
        counts: dict[int, int] = {}
        for o in optimizers:
            for g in o.param_groups:
                for p in g["params"]:
                    counts[id(p)] = counts.get(id(p), 0) + 1
        twice = sorted(
            "=".join(groups[pid]) for pid, n in counts.items() if n > 1 and pid in groups
        )
        out["held_twice"] = ",".join(twice)
    return out


def grads(root: Any) -> dict[str, Any]:
    """Each parameter's ``.grad`` by name; a parameter without one is left out."""
    return {n: p.grad for n, p in root.named_parameters() if p.grad is not None}


def put_back_modes(root: Any, eval_modules: str, frozen: str | None = None) -> int:
    """Set each module's training flag, and each parameter's ``requires_grad`` where
    ``frozen`` is given, as they were; the number changed."""
    off = set(eval_modules.split(",")) - {""}
    n = 0
    for name, m in root.named_modules():
        want = (name or "<root>") not in off
        if m.training != want:
            m.training = want
            n += 1
    if frozen is not None:
        fixed = set(frozen.split(",")) - {""}
        for name, p in root.named_parameters():
            want = name not in fixed
            if p.requires_grad != want:
                p.requires_grad_(want)
                n += 1
    return n


def put_back_ties(root: Any, tied: str, optimizers: list[Any]) -> list[str]:
    """Make the names of each saved group share one Parameter again: the one an optimizer
    holds, else the first name's. Returns the names rebound."""
    import torch

    held = {id(p) for o in optimizers for g in o.param_groups for p in g["params"]}
    rebound: list[str] = []
    for group in filter(None, tied.split(";")):
        names = group.split("=")
        params = [root.get_parameter(n) for n in names]
        if all(p is params[0] for p in params):
            continue
        keep = next((p for p in params if id(p) in held), params[0])
        for name, p in zip(names, params, strict=True):
            if p is keep:
                continue
            owner, _, leaf = name.rpartition(".")
            module = root.get_submodule(owner) if owner else root
            with torch.no_grad():
                setattr(module, leaf, keep)
            rebound.append(name)
    return rebound


def unsaved_buffers(root: Any) -> dict[str, Any]:
    """Each buffer the module tree holds that its ``state_dict`` leaves out (registered with
    ``persistent=False``), by its dotted name."""
    out: dict[str, Any] = {}
    for prefix, m in root.named_modules():
        for name in sorted(getattr(m, "_non_persistent_buffers_set", ())):
            buf = m._buffers.get(name)
            if buf is not None:
                out[f"{prefix}.{name}" if prefix else name] = buf
    return out


def put_back_buffers(root: Any, saved: dict[str, Any]) -> list[str]:
    """Copy each saved non-persistent buffer into the buffer of that name; the names set
    (a buffer that no longer exists, or has another shape, is left alone)."""
    now = unsaved_buffers(root)
    done = []
    for name, value in saved.items():
        buf = now.get(name)
        if buf is not None and tuple(buf.shape) == tuple(value.shape):
            buf.copy_(value.to(buf.device, buf.dtype))
            done.append(name)
    return done


def put_back_grads(root: Any, saved: dict[str, Any]) -> int:
    """Each parameter's ``.grad`` as saved (None where none was); the number set."""
    n = 0
    for name, p in root.named_parameters():
        g = saved.get(name)
        p.grad = None if g is None else g.detach().clone().to(p.device)
        n += g is not None
    return n


def put_back_hooks(root: Any, hooks: str) -> dict[str, int]:
    """Remove the hooks registered after those the saved counts hold (the latest first):
    'NAME:TABLE' -> how many were removed. A table holding fewer than saved is left as it is
    (a hook is a function: there is nothing to put back)."""
    want = {k: int(n) for k, _, n in (e.rpartition("=") for e in hooks.split(",") if e)}
    removed: dict[str, int] = {}
    for key, table in hook_tables(root).items():
        extra = len(table) - want.get(key, 0)
        for handle in list(table)[len(table) - extra :] if extra > 0 else []:
            del table[handle]
        if extra > 0:
            removed[key] = extra
    return removed
