"""The job's live objects, found from inside its process: its top-level modules, optimizers
and data cursors, each parameter's name, and what a cursor's ``state_dict`` leaves out.

Read by the code the bootstrap injects into the job's processes (the state capture, the
restore-cursors policy, restore-state). Nothing here imports torch until it is called.
"""

from __future__ import annotations

import gc
from typing import Any

PLAIN = (str, int, float, bool, type(None))


def _plain(v: Any, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if isinstance(v, PLAIN):
        return True
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain(x, depth + 1) for k, x in v.items())
    if isinstance(v, list | tuple):
        return len(v) <= 64 and all(_plain(x, depth + 1) for x in v)
    return False


_LIBS = ("site-packages", "dist-packages")


def job_modules() -> dict[str, Any]:
    """The job's own modules loaded in this process, by name: those whose file lies below
    the working directory, outside installed packages and this project."""
    import os
    import sys

    root = os.getcwd().rstrip(os.sep) + os.sep
    out: dict[str, Any] = {}
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        # a relative __file__ (an extension's stub, a frozen module) is no file of the job's
        if not (isinstance(f, str) and f.endswith(".py") and os.path.isabs(f)):
            continue
        if (
            f.startswith(root)
            and not any(s in f for s in _LIBS)
            and name.split(".")[0] not in ("triage_agent",)
        ):
            out[name] = mod
    return out


def module_globals(limit: int = 256) -> dict[str, Any]:
    """``module.name`` -> value of every plain module-level value of the job's own modules
    (a counter, a flag, a curriculum's progress): state no checkpoint of objects holds.
    Strings longer than a line and containers are left out: the state that moves is small."""
    out: dict[str, Any] = {}
    for modname, mod in sorted(job_modules().items()):
        if modname in ("__main__", "__mp_main__"):
            continue  # the script's globals are its arguments and its loop, not held state
        for name, v in sorted(vars(mod).items()):
            if name.startswith("__") or not isinstance(v, PLAIN):
                continue
            if isinstance(v, str) and len(v) > 200:
                continue
            out[f"{modname}.{name}"] = v
            if len(out) >= limit:
                return out
    return out


def _qual(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def own_class(cls: type) -> bool:
    """A class of the job (or a library it brings), not of torch or DeepSpeed themselves."""
    mod = cls.__dict__.get("__module__")
    return isinstance(mod, str) and mod.split(".")[0] not in _FRAMEWORKS


_FRAMEWORKS = ("torch", "deepspeed", "triage_agent", "builtins")


def live_objects(*classes: type) -> list[Any]:
    """The live objects of these classes. By ``type()``: ``isinstance`` would call
    ``__class__`` on proxies and lazy modules, which may warn or import."""
    return [o for o in gc.get_objects() if issubclass(type(o), classes)]


def data_cursors() -> dict[str, Any]:
    """Every data cursor of the process, by a name both runs give it alike."""
    import torch

    found: dict[str, list[Any]] = {}
    loader_iter = torch.utils.data.dataloader._BaseDataLoaderIter
    for o in gc.get_objects():
        cls = type(o)
        if issubclass(cls, loader_iter):
            found.setdefault("torch.utils.data:DataLoader", []).append(o)
        elif (
            own_class(cls)
            and callable(getattr(cls, "state_dict", None))
            and callable(getattr(cls, "load_state_dict", None))
            and not issubclass(cls, torch.nn.Module | torch.optim.Optimizer | type)
        ):
            found.setdefault(_qual(cls), []).append(o)
    out: dict[str, Any] = {}
    for name, objs in sorted(found.items()):
        for k, o in enumerate(objs):
            key = name if len(objs) == 1 else f"{name}#{k}"
            out[key] = o
    return out


def unsaved_attrs(o: Any, saved: Any) -> dict[str, Any]:
    """A job cursor's plain attributes that its ``state_dict`` leaves out: what a checkpoint
    of it loses, whether or not it matters. The key ``state_dict_at`` says where that
    ``state_dict`` is defined."""
    keys = set(saved) if isinstance(saved, dict) else set()
    out = {
        a: v
        for a, v in sorted(getattr(o, "__dict__", {}).items())
        if a not in keys and not a.startswith("__") and _plain(v)
    }
    if out:
        fn = getattr(type(o).state_dict, "__code__", None)
        if fn is not None:
            out["state_dict_at"] = f"{fn.co_filename}:{fn.co_firstlineno}"
    return out


def saved_keys(o: Any) -> dict[str, None] | None:
    try:
        saved = o.state_dict()
    except Exception:  # noqa: BLE001 - a job's own state_dict; a failure means nothing to say
        return None
    return dict.fromkeys(saved) if isinstance(saved, dict) else None


def cursor_state(o: Any) -> Any:
    """A cursor's position as plain values, or None when it has none that is plain."""
    import torch

    if isinstance(o, torch.utils.data.dataloader._BaseDataLoaderIter):
        state: dict[str, Any] = {"batches_yielded": o._num_yielded}
        sampler = getattr(o, "_index_sampler", None)
        sampler = getattr(sampler, "sampler", sampler)
        if isinstance(getattr(sampler, "epoch", None), int):
            state["sampler_epoch"] = sampler.epoch
        return state
    try:
        state = o.state_dict()
    except Exception:  # noqa: BLE001 - a job's own state_dict; a failure means no cursor
        return None
    return state if _plain(state) else None


def root_modules() -> list[Any]:
    """The modules no other module holds: the model, and a teacher or an EMA copy beside it."""
    import torch

    mods = live_objects(torch.nn.Module)
    inner = {id(c) for m in mods for c in m.children()}
    return [m for m in mods if id(m) not in inner]


def param_names(roots: list[Any]) -> dict[int, str]:
    """id(parameter) -> its name: ``model``'s own names, ``modelK.``-prefixed for the others."""
    names: dict[int, str] = {}
    for k, root in enumerate(roots):
        prefix = "" if k == 0 else f"model{k}."
        for n, p in root.named_parameters():
            names.setdefault(id(p), prefix + n)
    return names


def by_param(roots: list[Any], optimizers: list[Any]) -> dict[str, dict[str, Any]]:
    """Every optimizer's state per parameter, keyed by the parameter's name."""
    names = param_names(roots)
    out: dict[str, dict[str, Any]] = {}
    for opt in optimizers:
        for p, st in opt.state.items():
            if id(p) in names:
                out[names[id(p)]] = dict(st)
    return out
