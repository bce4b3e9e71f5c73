"""restore-state PART[,PART]: training state a resume did not bring back, put back.

Parts are named as the state capture names them (:func:`triage_agent.boundary_capture.state_now`):

- ``model``: the largest top-level module's own state (a checkpoint that rounds or drops
  part of it on the way);
- ``modelK`` (K >= 1): the K-th top-level module by size after the largest, the ``model``
  (a teacher, an EMA copy, a second network);
- ``optimizer``: every optimizer's per-parameter state, keyed by the parameter's name in
  the job's modules, not by its position: a resume that rebuilds the optimizer over the
  parameters in another order attaches the saved moments to other tensors, and only the
  names tell;
- ``grads``: the model's accumulated gradients, by parameter name (a checkpoint taken
  inside an accumulation window loses the part already summed);
- ``ties``: which of the model's parameter names share one tensor (a restore that gives a
  tied weight a Parameter of its own trains two tensors where there was one);
- ``modes``: the model's modules' training modes and its parameters' ``requires_grad``;
- ``hooks``: how many hooks each of the model's modules and parameters holds; the hooks a
  resumed process registered beyond those are removed, latest first (a resume that
  registers a gradient hook again applies it twice);
- ``groups``: every optimizer's param groups' hyper-parameters (learning rate, weight decay,
  betas: every key but the parameters), by optimizer and group index (a resume that sets a
  group's learning rate again after loading the optimizer overwrites the rate the checkpoint
  carried); the place is the job's last write to a group key after the load;
- ``buffers``: the buffers the model's modules register outside their state_dict
  (``persistent=False``), by name (a running statistic the forward updates, which a
  checkpoint of the state_dict leaves behind); the place is the line that registered it so.

The process that saves writes the parts at each step the job logs (``MetricLog.log``) and
once more at its end; a process that resumes from step K (``MetricLog(..., resumed_from=K)``)
puts back, at its first module forward and after whatever its own restore did, the saving
process's end when the last step that process logged is K (it may have saved inside step
K+1), else its state at step K. It reports what it put back and the job's line that last
loaded each part (``load_state_dict``), or that gave a tied name its own Parameter, or that
set a module's mode, or, for a hook removed, the first line of the job's path to its
registration that the path to the hooks kept does not share, for the evidence to name. If every step then matches, the part carries
the whole difference of the resume.

Installed by the injected bootstrap from the patch file's ``restore_state``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
from typing import Any

from .import_hooks import on_import
from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line, job_stack
from .job_objects import by_param, live_objects, param_names, root_modules
from .module_structure import (
    MODULE_HOOKS,
    TENSOR_HOOKS,
    grads,
    hook_tables,
    put_back_buffers,
    put_back_grads,
    put_back_hooks,
    put_back_modes,
    put_back_ties,
    structure,
    unsaved_buffers,
)
from .source_literals import job_sources, listing_site, name_site

PART_RE = r"^(model[1-9]?|optimizer|groups|grads|ties|modes|hooks|buffers)$"
FILE = ".triage-state-step{step}-rank{rank}.pt"
END_FILE = ".triage-state-end{step}-rank{rank}.pt"
# a checkpoint written with state_dicts taken after step K whose tensors an update wrote since
STALE_FILE = ".triage-state-stale{step}-rank{rank}.json"
# sha256 of each checkpoint file the saving process wrote -> the last step logged before it
WRITTEN_FILE = ".triage-state-written-rank{rank}.json"
REPORT = ".triage-state-restored.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)
# parts of the largest module that no state_dict of it holds
STRUCTURE = ("grads", "ties", "modes", "hooks", "buffers")


def install(parts: list[str], report: str, pending: dict[str, list[Any]]) -> None:
    """Save ``parts`` at each logged step and put them back after a resume, in this process
    (``pending``: module name -> callbacks, run by the bootstrap's import watcher)."""
    loaded: dict[int, str] = {}  # id(object) -> the job's line that last loaded its state
    assigned: dict[tuple[int, str], str] = {}  # (id(module), name) -> the line that set it
    moded: dict[int, str] = {}  # id(module) -> the job's line that last set its mode
    frozen_at: dict[int, str] = {}  # id(parameter) -> the job's line that last set requires_grad
    # id(hook table) -> the job's path to each registration into it, in order
    hooked: dict[int, list[list[str]]] = {}
    # (id(module), buffer name) -> the job's line that registered it outside the state_dict
    unsaved_at: dict[tuple[int, str], str] = {}
    # (id(optimizer), group index, key) -> the job's line that wrote it after a load
    group_writes: dict[tuple[int, int, str], str] = {}
    updates = [0, 0]  # optimizer steps taken in this process, and the count at the last log
    # id(state_dict result) -> (the job's line that asked for it, updates then, the dict,
    # "model" or "optimizer", the last step logged then)
    built: dict[int, tuple[str, int, Any, str, int | None]] = {}
    last_logged: list[int] = []
    reads: list[tuple[str, str, str | None]] = []  # (path, sha256, job's line) of each torch.load
    restored: dict[int, int] = {}  # storage pointer of a loaded tensor -> id(its module)
    rewritten: dict[int, str] = {}  # id(module) -> the job's line that wrote it after the load
    settled = [False]  # the first forward ran: writes from here on are training's
    quiet = [0]  # inside this module's own snapshot: its state_dict calls are not the job's
    with open(report, "a") as fh:
        for part in parts:
            line = {"pid": os.getpid(), "target": f"restore-state {part}", "event": "patched"}
            fh.write(json.dumps(line) + "\n")

    def on_torch(module: Any = None) -> None:
        torch = module or sys.modules["torch"]
        for cls in (torch.nn.Module, torch.optim.Optimizer):
            watch_loads(cls)
        if "groups" in parts:
            watch_groups(torch.optim.Optimizer)
        if "ties" in parts or "modes" in parts:
            watch_structure(torch.nn.Module)
        if "hooks" in parts:
            watch_hooks(torch)
        if "buffers" in parts:
            watch_buffers(torch.nn.Module)
        if any(p.startswith("model") or p == "optimizer" for p in parts):
            from torch.optim.optimizer import register_optimizer_step_post_hook

            register_optimizer_step_post_hook(lambda *_: updates.__setitem__(0, updates[0] + 1))
            for cls in (torch.nn.Module, torch.optim.Optimizer):
                watch_state_dicts(cls)
            watch_writes_after_load(torch)
        watch_reads(torch)
        name = "triage_agent.metrics"
        if name in sys.modules:
            on_metrics(sys.modules[name])
        else:
            on_import({name: [on_metrics]})

    def watch_loads(cls: Any) -> None:
        orig = cls.load_state_dict

        def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
            where = job_line(_SKIP)
            if where is not None:
                loaded[id(self)] = f"{where[0]}:{where[1]}"
            out = orig(self, *args, **kwargs)
            if not quiet[0] and hasattr(self, "parameters"):
                for t in (*self.parameters(), *self.buffers()):
                    if (ptr := _storage(t)) is not None:
                        restored[ptr] = id(self)
            return out

        cls.load_state_dict = load_state_dict

    def watch_writes_after_load(torch: Any) -> None:
        """The job's last in-place write into a module's restored parameters or buffers
        between its load and the first forward (a set-up that initialises again): the line
        that undid the restore, where the load itself was right."""
        from torch.overrides import TorchFunctionMode

        from .outplace import is_in_place

        class WritesAfterLoad(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                kwargs = kwargs or {}
                if (
                    restored
                    and not settled[0]
                    and not quiet[0]
                    and args
                    and isinstance(args[0], torch.Tensor)
                    and is_in_place(func, kwargs)
                    and (owner := restored.get(_storage(args[0]))) is not None
                    and (where := job_line(_SKIP)) is not None
                ):
                    rewritten[owner] = f"{where[0]}:{where[1]}"
                return func(*args, **kwargs)

        WritesAfterLoad().__enter__()  # a pass-through once the first forward has run

    def watch_reads(torch: Any) -> None:
        """Each checkpoint file the job reads, by content: a file an earlier save wrote and
        no later one rewrote is found by its bytes, whatever it was renamed to."""
        orig = torch.load

        def load(f: Any, *args: Any, **kwargs: Any) -> Any:
            if (
                not quiet[0]
                and isinstance(f, str | os.PathLike)
                and not os.path.basename(f).startswith(".triage-")
                and os.path.isfile(f)
            ):
                where = job_line(_SKIP)
                reads.append((os.fspath(f), _sha(f), where_s(where)))
            return orig(f, *args, **kwargs)

        torch.load = load

    def stale_reads(log: Any, resumed: int) -> dict[str, Any]:
        """The file a resume from step ``resumed`` read that the saving process wrote after
        an earlier step, and the line of the job's source that names it."""
        written = _read_written(log)
        for path, sha, where in reads:
            rec = written.get(sha)
            k = rec.get("step") if isinstance(rec, dict) else None
            if k is None or k >= resumed:
                continue
            name = os.path.basename(path)
            if rec.get("inside") and k + 1 == resumed:
                # written inside the step the resume declares ended, before it did: the
                # name is right, the moment is not
                return {
                    "file": name,
                    "written_after": k,
                    "resumed_from": resumed,
                    "read_at": where,
                    "inside_at": rec.get("went_on_at"),
                }
            return {
                "file": name,
                "written_after": k,
                "resumed_from": resumed,
                "read_at": where,
                "named_at": name_site(name, job_sources()),
            }
        return {}

    def watch_state_dicts(cls: Any) -> None:
        orig = cls.state_dict
        kind = "model" if cls.__name__ == "Module" else "optimizer"

        def state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, *args, **kwargs)
            if not quiet[0] and isinstance(out, dict):
                where = job_line(_SKIP)
                if where is not None:
                    step = last_logged[-1] if last_logged else None
                    built[id(out)] = (f"{where[0]}:{where[1]}", updates[0], out, kind, step)
                    for old in list(built)[:-16]:  # the latest few are all a save can hold
                        del built[old]
            return out

        cls.state_dict = state_dict

    def built_before_update(
        obj: Any, found: dict[str, tuple[str, int | None]], depth: int = 0
    ) -> dict[str, tuple[str, int | None]]:
        """By kind (model, optimizer), the job's line that took a state_dict the object being
        saved holds, when an optimizer step has run since it was taken and its tensors are
        the live ones (no copy): the checkpoint then holds values written after the
        state_dict was asked for."""
        import torch

        if depth > 3 or not isinstance(obj, dict | list | tuple):
            return found
        if isinstance(obj, dict) and id(obj) in built:
            line, then, held, kind, step = built[id(obj)]
            if held is obj and then < updates[0]:
                live = {
                    t.untyped_storage().data_ptr()
                    for t in _tensors(obj)
                    if torch.is_tensor(t) and t.numel()
                }
                owned = {
                    p.untyped_storage().data_ptr() for r in root_modules() for p in r.parameters()
                }
                for o in live_objects(torch.optim.Optimizer):
                    owned |= {
                        v.untyped_storage().data_ptr()
                        for st in o.state.values()
                        for v in st.values()
                        if torch.is_tensor(v) and v.numel()
                    }
                if live & owned:
                    found.setdefault(kind, (line, step))
                    return found
        for v in obj.values() if isinstance(obj, dict) else obj:
            built_before_update(v, found, depth + 1)
        return found

    def watch_structure(cls: Any) -> None:
        register, train = cls.register_parameter, cls.train

        def register_parameter(self: Any, name: str, param: Any) -> None:
            where = job_line(_SKIP)
            if where is not None:
                assigned[(id(self), name)] = f"{where[0]}:{where[1]}"
            return register(self, name, param)

        def set_mode(self: Any, mode: bool = True) -> Any:
            where = job_line(_SKIP)
            if where is not None:
                for m in self.modules():
                    moded[id(m)] = f"{where[0]}:{where[1]}"
            return train(self, mode)

        cls.register_parameter, cls.train = register_parameter, set_mode
        if "modes" in parts:
            watch_requires_grad(sys.modules["torch"].nn.Parameter)

    def watch_requires_grad(cls: Any) -> None:
        # a Parameter's flag is a C attribute: a property in front of it on the Python
        # class sees `p.requires_grad = x`, and the method's wrapper sees requires_grad_()
        base = sys.modules["torch"]._C.TensorBase.requires_grad
        method = cls.requires_grad_

        def mark(p: Any) -> None:
            where = job_line(_SKIP)
            if where is not None:
                frozen_at[id(p)] = f"{where[0]}:{where[1]}"

        def set_flag(self: Any, value: bool) -> None:
            base.__set__(self, value)
            mark(self)

        def requires_grad_(self: Any, requires_grad: bool = True) -> Any:
            out = method(self, requires_grad)
            mark(self)
            return out

        cls.requires_grad = property(base.__get__, set_flag)
        cls.requires_grad_ = requires_grad_

    def mode_sites(root: Any) -> dict[str, str]:
        """Module and parameter name -> the job's line that last set its mode or flag."""
        sites = {n or "<root>": moded[id(m)] for n, m in root.named_modules() if id(m) in moded}
        sites.update(
            {
                f"param:{n}": frozen_at[id(p)]
                for n, p in root.named_parameters()
                if id(p) in frozen_at
            }
        )
        return sites

    def watch_groups(cls: Any) -> None:
        orig = cls.load_state_dict

        class Group(dict):
            """A param group that says which line of the job wrote each key."""

            def __setitem__(g, key: Any, value: Any) -> None:  # noqa: N805
                super().__setitem__(key, value)
                where = job_line(_SKIP)
                if where is not None:
                    group_writes[(g._owner, g._index, str(key))] = f"{where[0]}:{where[1]}"

        def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, *args, **kwargs)
            for i, g in enumerate(self.param_groups):
                w = Group(g)
                w._owner, w._index = id(self), i
                self.param_groups[i] = w
            return out

        cls.load_state_dict = load_state_dict

    def watch_buffers(cls: Any) -> None:
        orig = cls.register_buffer

        def register_buffer(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, name, *args, **kwargs)
            where = job_line(_SKIP)
            if where is not None and name in getattr(self, "_non_persistent_buffers_set", ()):
                unsaved_at[(id(self), name)] = f"{where[0]}:{where[1]}"
            return out

        cls.register_buffer = register_buffer

    def watch_hooks(torch: Any) -> None:
        # each registration's path, filed under the table its handle lands in
        def wrap(cls: Any, name: str, tables: tuple[str, ...]) -> None:
            orig = getattr(cls, name, None)
            if orig is None:
                return

            def register(self: Any, *args: Any, **kwargs: Any) -> Any:
                handle = orig(self, *args, **kwargs)
                path = job_stack(_SKIP)
                for attr in tables:
                    table = getattr(self, attr, None)
                    if table is not None and getattr(handle, "id", None) in table:
                        hooked.setdefault(id(table), []).append(path)
                return handle

            setattr(cls, name, register)

        for name in ("register_hook", "register_post_accumulate_grad_hook"):
            wrap(torch.Tensor, name, TENSOR_HOOKS)
        for name in (
            "register_forward_pre_hook",
            "register_forward_hook",
            "register_full_backward_pre_hook",
            "register_full_backward_hook",
            "register_backward_hook",
        ):
            wrap(torch.nn.Module, name, MODULE_HOOKS)

    def hooks_placed(root: Any, removed: dict[str, int], tables: dict[str, Any]) -> str | None:
        """The first line of the path to a removed hook's registration that no kept hook's
        path holds: where the job took the extra turn (a resume calling set-up again)."""
        for key, n in removed.items():
            paths = hooked.get(id(tables[key]), [])
            if len(paths) < n:
                continue
            kept = {f for p in paths[: len(paths) - n] for f in p}
            for path in paths[len(paths) - n :]:
                turn = next((f for f in path if f not in kept), None)
                if turn is not None:
                    return turn
        return None

    def modes_back(root: Any, saved: dict[str, Any]) -> dict[str, Any]:
        """Put the saved modes and flags back. The place is the line that set what differs
        in the process that saved (a write the resumed process never makes again: an event
        that fired once before the save), else the resumed process's own line that set it
        otherwise."""
        off = set(saved["eval_modules"].split(",")) - {""}
        fixed = set((saved.get("frozen") or "").split(",")) - {""}
        differ = [
            name or "<root>"
            for name, m in root.named_modules()
            if ((name or "<root>") in off) != (not m.training)
        ]
        differ += [
            f"param:{n}"
            for n, p in root.named_parameters()
            if saved.get("frozen") is not None and (n in fixed) == p.requires_grad
        ]
        mine = mode_sites(root)
        theirs = saved.get("set_at") or {}
        at = next((theirs[n] for n in differ if n in theirs), None)
        verb = "sets it in the process that saved, and the resumed process does not"
        if at is None:
            at = next((mine[n] for n in differ if n in mine), None)
            verb = "sets it otherwise in the resumed process"
        elif last := next((mine[n] for n in differ if n in mine), None):
            verb += f" (it last sets it at {_here(last)})"
        n = put_back_modes(root, saved["eval_modules"], saved.get("frozen"))
        flags = sum(d.startswith("param:") for d in differ)
        what = f"{n - flags} modules' training mode" if n > flags else ""
        if flags:
            named = ", ".join(d.removeprefix("param:") for d in differ if d.startswith("param:"))
            what = ", ".join(filter(None, [what, f"requires_grad of {_few(named)}"]))
        return {"what": what or "nothing", "loaded_at": at, "verb": verb}

    def later(snap: dict[str, Any], kind: str) -> dict[str, Any]:
        """Where the checkpoint took the state it holds, when that is a later step's."""
        if not snap.get("_later"):
            return {}
        if line := (snap.get("_built_at") or {}).get(kind):
            return {
                "built_at": line,
                "verb": "takes the state_dict without a copy, and an update writes its "
                f"tensors before the checkpoint is written at {_here(snap['_written_at'] or '?')}",
            }
        return {"verb": "writes the checkpoint after an update that followed the step's log"}

    def ordered_roots() -> list[Any]:
        return sorted(root_modules(), key=lambda m: -sum(p.numel() for p in m.parameters()))

    def snapshot() -> dict[str, Any]:
        quiet[0] += 1
        try:
            return take_snapshot()
        finally:
            quiet[0] -= 1

    def take_snapshot() -> dict[str, Any]:
        import torch

        roots = ordered_roots()
        snap: dict[str, Any] = {}
        opts = live_objects(torch.optim.Optimizer)
        for part in parts:
            if part in STRUCTURE:
                if not roots:
                    continue
                if part == "grads":
                    snap[part] = {n: g.detach().clone() for n, g in grads(roots[0]).items()}
                elif part == "buffers":
                    snap[part] = {
                        n: b.detach().clone() for n, b in unsaved_buffers(roots[0]).items()
                    }
                elif part == "hooks":
                    snap[part] = structure(roots[0], opts)["hooks"]
                elif part == "ties":
                    snap[part] = structure(roots[0], opts)["tied"]
                else:
                    now = structure(roots[0], opts)
                    snap[part] = {k: now[k] for k in ("eval_modules", "frozen")}
                    snap[part]["set_at"] = mode_sites(roots[0])
            elif part == "groups":
                snap[part] = [
                    [
                        {
                            k: v.detach().clone() if torch.is_tensor(v) else v
                            for k, v in g.items()
                            if k != "params"
                        }
                        for g in o.param_groups
                    ]
                    for o in opts
                ]
            elif part == "optimizer":
                snap[part] = {
                    n: {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in st.items()}
                    for n, st in by_param(roots, live_objects(torch.optim.Optimizer)).items()
                }
            elif int(part[5:] or 0) < len(roots):
                snap[part] = {
                    k: v.detach().clone() for k, v in roots[int(part[5:] or 0)].state_dict().items()
                }
        return snap

    def put_back(snap: dict[str, Any]) -> dict[str, Any]:
        import torch

        roots = ordered_roots()
        said: dict[str, Any] = {}
        for part, saved in snap.items():
            if part.startswith("_"):
                continue
            if part in STRUCTURE:
                if not roots:
                    continue
                root = roots[0]
                if part == "buffers":
                    names = put_back_buffers(root, saved)
                    at = next(
                        (
                            unsaved_at[o]
                            for o in (_owner(root, n) for n in names)
                            if o in unsaved_at
                        ),
                        None,
                    )
                    said[part] = {
                        "what": ", ".join(names) or "nothing",
                        "loaded_at": at,
                        "verb": "registers it outside the state_dict (persistent=False)",
                    }
                elif part == "hooks":
                    tables = hook_tables(root)
                    removed = put_back_hooks(root, saved)
                    said[part] = {
                        "what": ", ".join(f"{n} hook(s) of {k}" for k, n in removed.items())
                        or "nothing",
                        "loaded_at": hooks_placed(root, removed, tables),
                        "verb": "registers hooks again",
                    }
                elif part == "grads":
                    n = put_back_grads(root, saved)
                    # nothing loads gradients: the place is the checkpoint that leaves them out
                    said[part] = {
                        "what": f"{n} parameters' accumulated gradients",
                        "written_at": snap.get("_written_at"),
                        # the list of what it holds, where the job spells it
                        "listed_at": listing_site(snap.get("_keys") or [], job_sources()),
                        "keys": snap.get("_keys") or [],
                    }
                elif part == "ties":
                    before = dict(assigned)  # rebinding below registers parameters too
                    rebound = put_back_ties(root, saved, live_objects(torch.optim.Optimizer))
                    owners = [_owner(root, name) for name in rebound]
                    at = next((before[o] for o in owners if o in before), None)
                    said[part] = {
                        "what": f"{', '.join(rebound) or 'nothing'} tied again",
                        "loaded_at": at,
                        "verb": "gives each a Parameter of its own",
                    }
                else:
                    said[part] = modes_back(root, saved)
            elif part == "groups":
                opts = live_objects(torch.optim.Optimizer)
                changed: list[str] = []
                at = None
                for k, (opt, groups) in enumerate(zip(opts, saved, strict=False)):
                    for i, (group, was) in enumerate(zip(opt.param_groups, groups, strict=False)):
                        for key, value in was.items():
                            if _same(group.get(key), value):
                                continue
                            at = at or group_writes.get((id(opt), i, key)) or loaded.get(id(opt))
                            dict.__setitem__(group, key, value)
                            changed.append(f"optimizer {k} group {i} {key}")
                said[part] = {
                    "what": ", ".join(changed[:6]) or "nothing",
                    "loaded_at": at,
                    "verb": "sets it after the optimizer's load",
                }
            elif part == "optimizer":
                names = param_names(roots)
                opts = live_objects(torch.optim.Optimizer)
                n = 0
                for opt in opts:
                    for group in opt.param_groups:
                        for p in group["params"]:
                            if names.get(id(p)) in saved:
                                opt.state[p] = dict(saved[names[id(p)]])
                                n += 1
                at = next((loaded[id(o)] for o in opts if id(o) in loaded), None)
                said[part] = {"what": f"{n} parameters' optimizer state, by name", "loaded_at": at}
                said[part] |= later(snap, "optimizer")
            else:
                k = int(part[5:] or 0)
                if k < len(roots):
                    at = loaded.get(id(roots[k]))  # the job's load, before this one
                    after = next(
                        (rewritten[id(m)] for m in roots[k].modules() if id(m) in rewritten),
                        None,
                    )
                    roots[k].load_state_dict(saved)
                    said[part] = {
                        "what": f"{type(roots[k]).__name__} ({len(saved)} tensors)",
                        "loaded_at": after or at,
                        # the main model: what was saved may be where it went wrong
                        "written_at": snap.get("_written_at") if k == 0 else None,
                    } | later(snap, "model")
                    if after:
                        # the load was right, and a later write undid it
                        said[part]["verb"] = "writes the restored state again after the load"
                        said[part].pop("written_at", None)
        return said

    def on_metrics(metrics: Any) -> None:
        import torch

        cls = metrics.MetricLog
        if getattr(cls.log, "_triage_restore_state", False):
            return
        steps: dict[int, list[int]] = {}  # id(MetricLog) -> the steps it logged
        save = torch.save  # the job's own, before any wrapping below
        orig_init, orig_log = cls.__init__, cls.log

        def at(log: Any, step: int) -> str:
            return str(log.file.parent / FILE.format(step=step, rank=log.rank))

        def __init__(log: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(log, *args, **kwargs)
            resumed = kwargs.get("resumed_from", args[2] if len(args) > 2 else None)
            if resumed is None:
                ended: list[int] = []
                saved: list[bool] = []

                def at_save(*args: Any, **kwargs: Any) -> Any:
                    result = save(*args, **kwargs)
                    if ended:  # the state a checkpoint written after step K holds
                        saved.append(True)
                        snap = snapshot()
                        where = job_line(_SKIP)
                        snap["_written_at"] = where_s(where)
                        what = args[0] if args else None
                        if isinstance(what, dict) and all(isinstance(k, str) for k in what):
                            snap["_keys"] = sorted(what)
                        # an update since step K's log: the file holds a later step's state
                        snap["_updated_since_log"] = updates[0] - updates[1]
                        if len(args) > 1 and isinstance(args[1], str | os.PathLike):
                            inside = snap["_updated_since_log"] > 0
                            sha = note_written(log, args[1], ended[-1], inside)
                            if inside:  # inside step K+1: where does that step go on?
                                on_after_save(lambda at: note_went_on(log, sha, at))
                        stale = built_before_update(args[0], {}) if args else {}
                        for k in {step for _, step in stale.values() if step is not None}:
                            # state_dicts taken after step k, written after an update: what
                            # a resume from step k finds is not step k's state
                            with open(stale_at(log, k), "w") as fh:
                                lines = {kind: v[0] for kind, v in stale.items() if v[1] == k}
                                json.dump({"built_at": lines, "written_at": where_s(where)}, fh)
                        save(snap, end_at(log, ended[-1]))
                    return result

                def at_end() -> None:
                    # nothing saved through torch.save: the end, while the objects live
                    if ended and not saved and root_modules():
                        save(snapshot(), end_at(log, ended[-1]))

                torch.save = at_save
                steps[id(log)] = ended
                atexit.register(at_end)
                return
            # the saving process's end, when the last step it logged is this one: it may
            # have saved inside the next step (an accumulation window), after step K's log
            path = end_at(log, resumed)
            if not os.path.exists(path):
                path = at(log, resumed)
            if not os.path.exists(path):
                return
            snap = torch.load(path, weights_only=False)
            logged = at(log, resumed)
            stale: dict[str, Any] = {}
            if os.path.exists(stale_at(log, resumed)):
                with open(stale_at(log, resumed)) as fh:
                    stale = json.load(fh)
            if (snap.get("_updated_since_log") or stale) and os.path.exists(logged):
                # the saving process updated the model after logging step K and before its
                # save: the state step K ended with is the one it logged
                then = torch.load(logged, weights_only=False)
                for part in parts:
                    if (part.startswith("model") or part == "optimizer") and part in then:
                        snap[part] = then[part]
                snap["_later"] = True
                snap["_built_at"] = stale.get("built_at") or {}
                snap["_written_at"] = stale.get("written_at") or snap.get("_written_at")
            out = str(log.file.parent / REPORT)
            handle: list[Any] = []
            early: dict[str, Any] = {}
            opts = live_objects(torch.optim.Optimizer)
            if "groups" in snap and any(id(o) in loaded for o in opts):
                # the job declares its resume after loading the optimizer: its restore is
                # done, and the first step's own writes to the rate (a schedule set at the
                # step's start) are still to come, so the groups go back now
                early = put_back({"groups": snap.pop("groups")})

            def first_forward(module: Any, inputs: Any) -> None:
                if not handle:  # a teacher's forward under no_grad counts: it reads the part
                    return
                handle.pop().remove()
                settled[0] = True
                said = early | put_back(snap)
                if stale := stale_reads(log, resumed):
                    for part in said:
                        if part.startswith("model") or part == "optimizer":
                            said[part]["stale"] = stale
                with open(out, "w") as fh:
                    json.dump(said, fh)
                with open(report, "a") as fh:
                    for part in said:
                        line = {
                            "pid": os.getpid(),
                            "target": f"restore-state {part}",
                            "event": "called",
                        }
                        fh.write(json.dumps(line) + "\n")

            handle.append(torch.nn.modules.module.register_module_forward_pre_hook(first_forward))

        def note_written(log: Any, path: Any, step: int, inside: bool) -> str:
            """File the checkpoint's bytes under the last step logged before it, and whether
            an update since that log put it inside the next step."""
            sha = _sha(path)
            written = _read_written(log)
            written[sha] = {"step": step, "inside": inside}
            with open(_written_path(log), "w") as fh:
                json.dump(written, fh)
            return sha

        def note_went_on(log: Any, sha: str, at: str) -> None:
            written = _read_written(log)
            if isinstance(written.get(sha), dict):
                written[sha]["went_on_at"] = at
                with open(_written_path(log), "w") as fh:
                    json.dump(written, fh)

        def stale_at(log: Any, step: int) -> str:
            return str(log.file.parent / STALE_FILE.format(step=step, rank=log.rank))

        def end_at(log: Any, step: int) -> str:
            return str(log.file.parent / END_FILE.format(step=step, rank=log.rank))

        def log_step(log: Any, step: int, *args: Any, **kwargs: Any) -> Any:
            result = orig_log(log, step, *args, **kwargs)
            updates[1] = updates[0]
            last_logged.append(step)
            save(snapshot(), at(log, step))
            steps.get(id(log), []).append(step)
            return result

        log_step._triage_restore_state = True  # type: ignore[attr-defined]
        cls.__init__, cls.log = __init__, log_step

    if "torch" in sys.modules:
        on_torch()
    else:
        pending.setdefault("torch", []).append(on_torch)


def _owner(root: Any, name: str) -> tuple[int, str]:
    """(id of the module that holds parameter or buffer ``name``, its attribute name)."""
    owner, _, leaf = name.rpartition(".")
    return id(root.get_submodule(owner) if owner else root), leaf


def _same(a: Any, b: Any) -> bool:
    """Whether a hyper-parameter holds the value saved (a tensor compared by its bytes)."""
    import torch

    if torch.is_tensor(a) or torch.is_tensor(b):
        return torch.is_tensor(a) and torch.is_tensor(b) and torch.equal(a, b)
    return type(a) is type(b) and a == b


def _few(names: str, k: int = 4) -> str:
    """The first ``k`` of a comma-separated list, and how many more."""
    items = names.split(", ")
    more = len(items) - k
    return ", ".join(items[:k]) + (f" and {more} more" if more > 0 else "")


def _here(where: str) -> str:
    """A job's file:line relative to the working directory when it lies below it."""
    file, _, line = where.rpartition(":")
    root = os.getcwd().rstrip("/") + "/"
    return (file[len(root) :] if file.startswith(root) else file) + ":" + line


def _tensors(obj: Any, depth: int = 0) -> list[Any]:
    """The tensors a state_dict holds, nested dicts and lists included."""
    if depth > 4:
        return []
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v, depth + 1)]
    if isinstance(obj, list | tuple):
        return [t for v in obj for t in _tensors(v, depth + 1)]
    return [obj]


def _storage(t: Any) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError, NotImplementedError):
        return None


def _written_path(log: Any) -> str:
    return str(log.file.parent / WRITTEN_FILE.format(rank=log.rank))


def _read_written(log: Any) -> dict[str, Any]:
    try:
        with open(_written_path(log)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def on_after_save(found: Any) -> None:
    """Call ``found`` with 'file:line' of the deepest of the job's frames around a checkpoint
    save (called from inside the save) that goes on to call something after it: the
    function in which the step carries on past the save (a helper that only writes the file
    returns first). Its line is the one it stood at when the save ran: the call that wrote
    the checkpoint, as that function makes it. A profile from the save to that first call."""
    frames: list[Any] = []
    lines: dict[int, str] = {}
    f = sys._getframe(2)
    while f is not None:
        if not any(s in f.f_code.co_filename for s in _SKIP):
            frames.append(f)  # held: their ids stay unique while the profile looks at them
            lines[id(f)] = f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    if not frames:
        return
    outer = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and id(frame.f_back) in lines:
            sys.setprofile(outer)
            at = lines[id(frame.f_back)]
            frames.clear()
            lines.clear()
            found(at)

    sys.setprofile(profile)


def _sha(path: Any) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def where_s(where: tuple[str, int] | None) -> str | None:
    return f"{where[0]}:{where[1]}" if where else None
