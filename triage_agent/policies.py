"""Run policies: one changed setting at a time, applied inside a run's processes by injection.

The injected ``sitecustomize`` calls :func:`apply_all` before the training script runs, so
a policy changes an unmodified command. A policy is the unit of a controlled intervention:
the workflow reruns a case under exactly one policy and compares the metric bits.

Policies:
- ``restore-rng``: DeepSpeed checkpoints (``DeepSpeedEngine.save_checkpoint``) also save
  every RNG stream of the process (python ``random``, numpy, torch CPU, each CUDA device,
  DeepSpeed's activation-checkpointing CUDA RNG tracker when present), one file per rank
  beside the checkpoint tag, and ``load_checkpoint`` restores them. This is the fix to try
  when a resumed run diverges at its first step; it is the same change a user makes with
  ``client_state`` in their own script.
- ``restore-scheduler``: every LR scheduler's state saved when ``MetricLog.log(K)`` returns and
  loaded into the schedulers of a process that opens its log with ``resumed_from=K``: for a
  job with its own checkpoint code whose resume leaves the schedule where a fresh one starts.
- ``restore-cursors``: the same for the plain attributes that the ``state_dict`` of each of the
  job's data cursors leaves out (:func:`triage_agent.job_objects.unsaved_attrs`).
- ``deterministic``: ``torch.use_deterministic_algorithms(True)``, cuDNN deterministic and
  not benchmarking, and ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` when unset.
- ``recompute-state``: activation checkpointing's recomputation runs under the state its
  forward ran under (:mod:`triage_agent.recompute_state`).
- ``rebind-optimizer``: an optimizer updates the parameters its model trains with, not those
  a later swap left behind (:mod:`triage_agent.optimizer_membership`).
- ``keep-saved``: a backward reads the values its forward saved, whatever was written over
  them since (:mod:`triage_agent.saved_tensors`).
- ``unique-params``: an optimizer updates each parameter once per step, however often its
  groups list it (:mod:`triage_agent.unique_params`).
- ``observe-hooks``: a module's forward hooks observe and change nothing
  (:mod:`triage_agent.observed_hooks`).
- ``advance-epochs``: each pass over a data loader advances its sampler's epoch
  (:mod:`triage_agent.sampler_epochs`).
- ``unscale-first``: gradients are clipped after the loss scale is taken out
  (:mod:`triage_agent.amp_order`).
  A job with its own checkpoint code is reached through the steps it reports: the streams
  are saved each time ``MetricLog.log(K)`` returns and restored when a resumed process opens
  its log with ``resumed_from=K``.
Limits: a job that does not report its steps through ``MetricLog`` and checkpoints
without DeepSpeed's engine (Megatron-LM's ``save_checkpoint``) needs its own policy.

Function patches (:class:`FunctionPatch`) are the third kind of in-process change: one
function or method, named ``pkg.mod:Qual.name``, made a no-op returning None (suppress) or
routed to another function (replace), run as it is under every generator's state saved
before the call and restored after it (isolate-rng: its draws cannot reach training), or run
as it is and followed by attributes set on its object (restore-attrs, on a class's
``load_state_dict``: what it leaves out, put back with the other run's values), in every
process of the run, with no edit to any source file. A module imported before the patch is applied is patched at once; one imported
later is patched right after it executes, before any importer sees its names. Each process
appends to the patch file's report what it patched and whether the function was then called,
so a rerun can say that a patch never took effect instead of passing that off as a result.
A suppression scoped to ``init`` drops only the calls made before the first step begins (the
first module forward with grad enabled, the boundary the tracer's ``init`` phase ends at) and
lets every later call through: a function both runs call in their steps, that one run also
calls during initialisation, is tested by its initialisation calls alone. Its report names
the frame of the first call it dropped, the line that made the extra call.
Limits: a function the job reached through a name bound before its module was patched (none
here: patching happens at import) or defined in the ``__main__`` script is not reached.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from .errors import InputError
from .import_hooks import on_import
from .job_objects import cursor_state, data_cursors, own_class, saved_keys, unsaved_attrs
from .metrics_reports import append_event
from .rng_streams import rng_restore, rng_snapshot, seed_all
from .seed_pins import SeedPin

RNG_FILE = "triage_rng_rank{rank}.pt"


def _restore_rng() -> None:
    # A DeepSpeed engine checkpoint carries the streams; a job with its own checkpoint code
    # is reached through the steps it reports (see _restore_rng_at_steps).
    for name, patch in (
        ("deepspeed.runtime.engine", _restore_rng_engine),
        ("triage_agent.metrics", _restore_rng_at_steps),
    ):
        if name in sys.modules:
            patch(sys.modules[name])
        else:
            on_import({name: [patch]})


_ENGINE_RESTORED: list[bool] = []
AT_STEP = ".triage_{what}/step{step}-rank{rank}.pt"
RESTORED = ".restored.json"  # beside a carried snapshot: what a resumed process put back


def _carry_at_steps(
    metrics: Any,
    what: str,
    snapshot: Callable[[], Any],
    restore: Callable[[Any], None],
    skip: Callable[[], bool] = lambda: False,
    said: Callable[[Any], Any] | None = None,
) -> None:
    """What ``snapshot`` returns saved when ``MetricLog.log(K)`` returns (beside the metrics,
    which every command of a run writes to the same directory) and handed to ``restore`` when
    a process opens its log with ``resumed_from=K``: the state step K+1 starts from, whatever
    code the job checkpoints with."""
    import torch

    cls = metrics.MetricLog
    marker = f"_triage_carries_{what}"
    if getattr(cls.log, marker, False):
        return
    orig_init, orig_log = cls.__init__, cls.log

    def at(log: Any, step: int) -> str:
        return str(log.file.parent / AT_STEP.format(what=what, step=step, rank=log.rank))

    def __init__(log, *args, **kwargs):
        orig_init(log, *args, **kwargs)
        resumed = kwargs.get("resumed_from", args[2] if len(args) > 2 else None)
        if resumed is not None and not skip() and os.path.exists(at(log, resumed)):
            snap = torch.load(at(log, resumed), weights_only=False)
            restore(snap)
            if said is not None:  # what was put back, for the evidence to name
                with open(at(log, resumed) + RESTORED, "w") as f:
                    json.dump(said(snap), f)

    def log_step(log, step, **values):
        out = orig_log(log, step, **values)
        path = at(log, step)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(snapshot(), path)
        return out

    setattr(log_step, marker, True)
    cls.__init__, cls.log = __init__, log_step


def _restore_rng_at_steps(metrics: Any) -> None:
    """Every RNG stream carried across a resume by the steps the job reports; an engine
    checkpoint that restored them already takes precedence."""
    _carry_at_steps(metrics, "rng", rng_snapshot, rng_restore, lambda: bool(_ENGINE_RESTORED))


def _schedulers() -> list[Any]:
    import gc

    import torch

    kind = torch.optim.lr_scheduler.LRScheduler
    return [o for o in gc.get_objects() if issubclass(type(o), kind)]


def _schedulers_restore(states: list[Any]) -> None:
    live = _schedulers()
    if len(live) == len(states):  # paired by creation order; another count pairs nothing
        for sched, state in zip(live, states, strict=True):
            sched.load_state_dict(state)


def _unsaved_now() -> dict[str, dict[str, Any]]:
    out = {}
    for name, o in data_cursors().items():
        state = cursor_state(o)
        keys = state if state is not None else saved_keys(o)
        if own_class(type(o)) and (left := unsaved_attrs(o, keys)):
            out[name] = left
    return out


def _unsaved_said(snap: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        name: {
            "attrs": sorted(a for a in attrs if a != "state_dict_at"),
            "at": attrs.get("state_dict_at"),
        }
        for name, attrs in snap.items()
    }


def _unsaved_restore(snap: dict[str, dict[str, Any]]) -> None:
    live = data_cursors()
    for name, attrs in snap.items():
        if name in live:
            for attr, value in attrs.items():
                if attr != "state_dict_at":
                    setattr(live[name], attr, value)


def _on_metrics(patch: Callable[[Any], None]) -> None:
    name = "triage_agent.metrics"
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        on_import({name: [patch]})


def _restore_cursors() -> None:
    _on_metrics(
        lambda metrics: _carry_at_steps(
            metrics, "cursors", _unsaved_now, _unsaved_restore, said=_unsaved_said
        )
    )


def _restore_scheduler() -> None:
    # A DeepSpeed engine checkpoint holds its scheduler already; this reaches the schedulers
    # of a job with its own checkpoint code, through the steps it reports.
    _on_metrics(
        lambda metrics: _carry_at_steps(
            metrics,
            "scheduler",
            lambda: [s.state_dict() for s in _schedulers()],
            _schedulers_restore,
        )
    )


def _restore_rng_engine(engine: Any) -> None:
    import torch

    DeepSpeedEngine = engine.DeepSpeedEngine
    orig_save, orig_load = DeepSpeedEngine.save_checkpoint, DeepSpeedEngine.load_checkpoint
    if getattr(orig_save, "_triage_policy", False):
        return

    def save_checkpoint(self, save_dir, tag=None, *args, **kwargs):
        resolved = tag if tag is not None else f"global_step{self.global_steps}"
        snap = rng_snapshot()  # before the save, which may itself draw random numbers
        out = orig_save(self, save_dir, resolved, *args, **kwargs)
        path = os.path.join(save_dir, str(resolved), RNG_FILE.format(rank=self.global_rank))
        torch.save(snap, path)
        return out

    def load_checkpoint(self, load_dir, *args, **kwargs):
        load_path, client_state = orig_load(self, load_dir, *args, **kwargs)
        if load_path is not None:
            path = os.path.join(os.path.dirname(load_path), RNG_FILE.format(rank=self.global_rank))
            if os.path.exists(path):
                rng_restore(torch.load(path, weights_only=False))
                _ENGINE_RESTORED.append(True)
        return load_path, client_state

    save_checkpoint._triage_policy = True  # type: ignore[attr-defined]
    DeepSpeedEngine.save_checkpoint = save_checkpoint
    DeepSpeedEngine.load_checkpoint = load_checkpoint


def _deterministic() -> None:
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def _recompute_state() -> None:
    from .recompute_state import install

    install()


def _keep_saved() -> None:
    from .saved_tensors import install

    install()


def _rebind_optimizer() -> None:
    from .optimizer_membership import install

    install()


def _unique_params() -> None:
    from .unique_params import install

    install()


def _observe_hooks() -> None:
    from .observed_hooks import install

    install()


def _advance_epochs() -> None:
    from .sampler_epochs import install

    install()


def _unscale_first() -> None:
    from .amp_order import install

    install()


POLICIES: dict[str, Callable[[], None]] = {
    "restore-rng": _restore_rng,
    "restore-scheduler": _restore_scheduler,
    "restore-cursors": _restore_cursors,
    "deterministic": _deterministic,
    "recompute-state": _recompute_state,
    "rebind-optimizer": _rebind_optimizer,
    "keep-saved": _keep_saved,
    "unique-params": _unique_params,
    "observe-hooks": _observe_hooks,
    "advance-epochs": _advance_epochs,
    "unscale-first": _unscale_first,
}

POLICY_HELP: dict[str, str] = {
    "restore-rng": "save every RNG stream with each DeepSpeed checkpoint, or at each step the job "
    "logs, and restore it on resume",
    "restore-scheduler": "save every LR scheduler's state at each step the job logs and load it "
    "into the resumed process's schedulers",
    "restore-cursors": "save the attributes that the state_dict of each of the job's own objects "
    "leaves out (a data cursor, a sampler, a trainer's step counter: any object of its own "
    "classes, not a module or an optimizer, with a "
    "state_dict and load_state_dict) at each step the job logs, and set them on the resumed "
    "process's objects after their load_state_dict; the evidence names the objects and "
    "attributes put back",
    "deterministic": "torch.use_deterministic_algorithms(True), cuDNN deterministic, CUBLAS_WORKSPACE_CONFIG",
    "recompute-state": "activation checkpointing recomputes each block under the state its "
    "forward ran under (the block's buffers and plain attributes, every generator), and the "
    "current values are put back after it",
    "rebind-optimizer": "at each optimizer's first step, every parameter it holds that the "
    "model no longer uses under that name is replaced by the one the model now uses (a layer "
    "swapped after the optimizer was built); the evidence names the job's line that swapped it",
    "unscale-first": "a clip of gradients a GradScaler has not yet unscaled unscales them first "
    "(and the job's own unscale of that step does nothing); the evidence names the job's line "
    "that clipped",
    "advance-epochs": "each pass over a data loader whose sampler shuffles by epoch advances that "
    "epoch by one when the job has not since the previous pass; the evidence names the job's "
    "line that began the pass",
    "observe-hooks": "every forward hook and forward pre-hook the job registers on a module runs "
    "as it is and what it returns is dropped, so the module's input and output stand; the "
    "evidence names the hook's line that returned a value",
    "unique-params": "every parameter an optimizer already holds is dropped as a group is "
    "added to it, so each is updated once per step; the evidence names the job's function that "
    "returned a list holding it twice",
    "keep-saved": "every tensor autograd saves for the backward is copied when saved, and the "
    "backward reads the copy: a write over a saved tensor that its version counter did not see "
    "cannot reach the gradients; the evidence names the job's lines that wrote into a saved "
    "tensor that changed",
}


def check(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise InputError(f"unknown policy {unknown[0]!r}; known: {', '.join(sorted(POLICIES))}")
    return names


def apply_all(names: list[str]) -> None:
    for name in check(list(names)):
        POLICIES[name]()


# -- function patches --------------------------------------------------------------------------
PATCHES_ENV = "TRIAGE_PATCHES"
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
CALLABLE_RE = re.compile(rf"({_DOTTED}):({_DOTTED})")


class FunctionPatch(BaseModel):
    """One function made a no-op (``replacement`` None) or routed to another function."""

    target: str = Field(description="pkg.mod:Qual.name, the function or method changed")
    replacement: str | None = Field(
        default=None, description="pkg.mod:func called instead; None makes it return None"
    )
    scope: Literal["run", "init"] = Field(
        default="run", description="init: only calls made before the first step is begun"
    )
    every: int | None = Field(
        default=None, description="a suppression that lets one call in every K through"
    )
    site: str | None = Field(
        default=None,
        description="FILE:LINE: only the calls whose innermost frame outside torch, DeepSpeed "
        "and this tool is that line of the job (the other calls run the function itself)",
    )
    set_after: dict[str, Any] | None = Field(
        default=None,
        description="call the function itself, then set these attributes of the object it was "
        "called on (a method's self): state a load_state_dict leaves out, put back",
    )
    isolate_rng: bool = Field(
        default=False,
        description="call the function itself, under every generator's state saved before the "
        "call and restored after it: its draws cannot reach the caller's streams",
    )
    seed_rng: bool = Field(
        default=False,
        description="call the function itself, under every generator seeded from a digest of "
        "the target and its call's plain arguments (ints, floats, strings, bools and tuples of "
        "them; tensors and objects left out), every stream put back after it: what it draws "
        "depends on the call alone, not on the process or the order it runs in",
    )
    isolate_writes: bool = Field(
        default=False,
        description="call the function itself, with the tensors it is handed (and those of the "
        "modules and objects it is handed) copied before the call and put back after it, and "
        "the modes and trainability of the modules it is handed too: its writes to them cannot "
        "reach training; "
        "what it returns is kept",
    )

    copy_return: bool = Field(
        default=False,
        description="call the function itself and hand its caller copies of the tensors it "
        "returns (:mod:`.returned_tensors`): a cache's own tensor cannot be written by callers",
    )
    as_stated: str | None = Field(
        default=None,
        description="call the function itself; where one of its arguments is this text, return "
        "the value the text states, in the type the function returned (:mod:`.stated_values`)",
    )

    @field_validator("target", "replacement")
    @classmethod
    def _callable_name(cls, v: str | None) -> str | None:
        if v is not None and not CALLABLE_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a callable name of the form pkg.module:Qualified.name")
        return v

    @property
    def module(self) -> str:
        return self.target.split(":", 1)[0]


class PatchFile(BaseModel):
    """What the injected bootstrap reads from the file named by ``TRIAGE_PATCHES``."""

    patches: list[FunctionPatch]
    settings: dict[str, Any] = Field(
        default_factory=dict, description="global numeric settings (:mod:`.settings`) to set"
    )
    seeds: list[SeedPin] = Field(
        default_factory=list, description="lines of the job given other seeds (:mod:`.seed_pins`)"
    )
    outplace: list[str] = Field(
        default_factory=list,
        description="file:line of the job whose in-place torch calls run out of place "
        "(:mod:`.outplace`)",
    )
    restore_state: list[str] = Field(
        default_factory=list,
        description="parts of training state a resume put back (:mod:`.restore_state`)",
    )
    restore_globals: dict[str, Any] = Field(
        default_factory=dict,
        description="the job's module globals set where a resume is declared "
        "(:mod:`.module_globals`)",
    )
    sync_grads: list[str] = Field(
        default_factory=list,
        description="parameters whose gradients are averaged across ranks (:mod:`.grad_sync`)",
    )
    fill_empty: list[str] = Field(
        default_factory=list,
        description="file:line of the job whose uninitialised allocations are zeroed "
        "(:mod:`.empty_fill`)",
    )
    follow: list[str] = Field(
        default_factory=list,
        description="texts whose conversions by the job's functions are recorded until the "
        "first module forward (:mod:`.stated_values`)",
    )
    values: bool = Field(
        default=False,
        description="record the small values the job's own functions are handed and return, "
        "line by line (:mod:`.call_values`)",
    )
    tie_params: list[str] = Field(
        default_factory=list,
        description="groups of parameter names made one tensor before any optimizer takes "
        "them (:mod:`.param_ties`)",
    )
    report: str = Field(description="JSONL file each process appends its patch events to")


class PatchError(InputError):
    """A patch names a function its module does not have."""


def _lookup(spec: str) -> tuple[Any, str, Any]:
    """(owner, attribute, value) of ``pkg.mod:Qual.name``; the module is imported."""
    mod_name, qual = CALLABLE_RE.fullmatch(spec).groups()  # type: ignore[union-attr]
    try:
        owner: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise PatchError(f"the patch {spec!r} cannot apply: {exc}") from None
    *path, attr = qual.split(".")
    try:
        for part in path:
            owner = getattr(owner, part)
        return owner, attr, getattr(owner, attr)
    except AttributeError:
        raise PatchError(f"{mod_name} has no {qual}: the patch {spec!r} cannot apply") from None


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


CALLED_FROM = "called from "
# isolate-writes: the job's line inside the function that set a mode it put back
WROTE_AT = "set a mode at "
_INIT = {"over": False, "hook": None}


def _watch_init() -> None:
    """Mark initialisation over at the first module forward with grad enabled."""
    if _INIT["over"] or _INIT["hook"] is not None:
        return
    import torch

    def first_forward(module: Any, args: Any) -> None:
        if torch.is_grad_enabled() and not _INIT["over"]:
            _INIT["over"] = True
            _INIT["hook"].remove()

    _INIT["hook"] = torch.nn.modules.module.register_module_forward_pre_hook(first_forward)


def _isolated(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` run under saved-and-restored generator state: what it draws is drawn
    from the same streams, and every stream is put back as it was when it returns."""

    def isolated(*args: Any, **kwargs: Any) -> Any:
        snap = rng_snapshot()
        try:
            return original(*args, **kwargs)
        finally:
            rng_restore(snap)

    return isolated


def _plain_args(v: Any, depth: int = 0) -> Any:
    """The part of a call's argument that names the call in every process alike: numbers,
    strings, booleans, None and tuples or lists of them; anything else (a tensor, an object,
    ``self``) is left out, as its identity or bytes are the process's."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, tuple | list) and depth < 2:
        return [_plain_args(x, depth + 1) for x in v]
    return "-"


def _identifies(v: Any) -> bool:
    """Whether a call's plain arguments hold a value that tells its calls apart (a number,
    a string), not only placeholders for tensors and objects."""
    if isinstance(v, list | tuple):
        return any(_identifies(x) for x in v)
    return v is not None and v != "-" and not isinstance(v, bool)


def _seeded(original: Callable[..., Any], target: str) -> Callable[..., Any]:
    """``original`` run with every global generator seeded from its call (``target`` and the
    plain arguments, or, where no plain argument names it, its place among the calls), and
    every stream put back when it returns."""
    import hashlib

    calls = [0]

    def seeded(*args: Any, **kwargs: Any) -> Any:
        plain = [_plain_args(list(args)), sorted((k, _plain_args(v)) for k, v in kwargs.items())]
        calls[0] += 1
        if not _identifies([plain[0], [v for _, v in plain[1]]]):
            # nothing in the call names it (only tensors and objects): one seed for every
            # call would make each call draw the same values, which tests nothing about
            # where its draws come from; the call is named by its place among the calls
            plain.append(["call", calls[0]])
        key = json.dumps([target, *plain])
        seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
        snap = rng_snapshot()
        try:
            seed_all(seed)
            return original(*args, **kwargs)
        finally:
            rng_restore(snap)

    return seeded


def _handed_tensors(args: tuple, kwargs: dict) -> list[Any]:
    """The tensors a call is handed: its tensor arguments, those one level inside a list,
    tuple or dict, every parameter, buffer and gradient of a module it is handed, and the
    tensor and module attributes of an object it is handed (a method's ``self``)."""
    import torch

    found: dict[int, Any] = {}

    def take(x: Any, depth: int) -> None:
        if isinstance(x, torch.Tensor):
            found.setdefault(id(x), x)
            if x.grad is not None:
                found.setdefault(id(x.grad), x.grad)
        elif isinstance(x, torch.nn.Module):
            for t in (*x.parameters(), *x.buffers()):
                take(t, depth)
        elif depth > 0 and isinstance(x, list | tuple):
            for v in x:
                take(v, depth - 1)
        elif depth > 0 and isinstance(x, dict):
            for v in x.values():
                take(v, depth - 1)
        elif depth > 0 and hasattr(x, "__dict__") and not isinstance(x, type):
            for v in vars(x).values():
                if isinstance(v, torch.Tensor | torch.nn.Module):
                    take(v, 0)

    for x in (*args, *kwargs.values()):
        take(x, 1)
    return list(found.values())


def _handed_modules(args: tuple, kwargs: dict) -> list[Any]:
    """Every module (and submodule) a call is handed, directly or as an attribute of an
    object it is handed (a method's ``self``)."""
    import torch

    found: dict[int, Any] = {}
    for x in (*args, *kwargs.values()):
        inner = [x] + (
            list(vars(x).values())
            if hasattr(x, "__dict__") and not isinstance(x, type | torch.nn.Module)
            else []
        )
        for v in inner:
            if isinstance(v, torch.nn.Module):
                for m in v.modules():
                    found.setdefault(id(m), m)
    return list(found.values())


def _isolated_writes(
    original: Callable[..., Any], tell: Callable[[str], None] = lambda e: None
) -> Callable[..., Any]:
    """``original`` with every tensor it is handed put back as it was when it returns. A
    module mode it leaves changed is told (``tell``) as :data:`WROTE_AT` and the job's line
    that set it, the first time: where inside the function the write was made."""
    told = [False]

    def isolated(*args: Any, **kwargs: Any) -> Any:
        import torch

        from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line

        saved = [(t, t.detach().clone()) for t in _handed_tensors(args, kwargs)]
        # a module's mode and its parameters' trainability are written like its buffers:
        # eval() left behind stops its dropout, requires_grad off stops its training
        handed = _handed_modules(args, kwargs)
        modes = [(m, m.training) for m in handed]
        trainable = [(p, p.requires_grad) for m in handed for p in m.parameters(recurse=False)]
        set_at: dict[int, str] = {}
        Module = torch.nn.Module
        train = Module.__dict__["train"]

        def train_noting(module: Any, mode: bool = True) -> Any:
            where = job_line((TORCH, PROJECT, DEEPSPEED))
            if where is not None:
                for m in module.modules():
                    set_at[id(m)] = f"{where[0]}:{where[1]}"
            return train(module, mode)

        Module.train = train_noting
        try:
            return original(*args, **kwargs)
        finally:
            Module.train = train
            with torch.no_grad():
                for t, copy in saved:
                    if t.shape == copy.shape and t.dtype == copy.dtype:
                        t.copy_(copy)
            for m, training in modes:
                if m.training != training and not told[0] and id(m) in set_at:
                    told[0] = True
                    tell(f"{WROTE_AT}{set_at[id(m)]}")
                m.training = training
            for p, wanted in trainable:
                if p.requires_grad != wanted:
                    p.requires_grad_(wanted)

    return isolated


def _then_set(original: Callable[..., Any], attrs: dict[str, Any]) -> Callable[..., Any]:
    """``original`` (a method), then each attribute set on the object it was called on."""

    def then_set(obj: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(obj, *args, **kwargs)
        for name, value in attrs.items():
            setattr(obj, name, value)
        return out

    return then_set


def _report(path: str, patch: FunctionPatch, event: str) -> None:
    append_event(path, patch.target, event)


def _called_from(site: str) -> bool:
    """Whether the job's innermost frame (outside torch, DeepSpeed and this tool) is ``site``,
    a FILE:LINE as the job names it (a path relative to its directory, or absolute)."""
    from .job_frames import DEEPSPEED, PROJECT, TORCH, at_site, job_line

    where = job_line((TORCH, PROJECT, DEEPSPEED), depth=3)
    return where is not None and at_site(site, where)


def _apply_patch(patch: FunctionPatch, report: str) -> None:
    owner, attr, original = _lookup(patch.target)
    if getattr(original, "_triage_patch", None) == patch.target:
        return
    # The replacement is looked up on the first call, not here: the target's module is also
    # imported by processes that never call it (the deepspeed launcher) and that cannot see
    # the replacement's module (a case's own folder is on the ranks' path, not the launcher's).
    impl: list[Any] = [_noop] if patch.replacement is None else []
    if patch.isolate_rng:
        impl = [_isolated(original)]
    if patch.seed_rng:
        impl = [_seeded(original, patch.target)]
    if patch.isolate_writes:
        impl = [_isolated_writes(original, lambda e: _report(report, patch, e))]
    if patch.set_after is not None:
        impl = [_then_set(original, patch.set_after)]
    if patch.copy_return:
        from .returned_tensors import copying

        impl = [copying(original, patch.target)]
    if patch.as_stated is not None:
        from .stated_values import as_stated

        impl = [as_stated(original, patch.as_stated)]
    called = [False]
    thinned = [0]  # calls a thinned suppression has seen
    if patch.scope == "init":
        _watch_init()

    def patched(*args: Any, **kwargs: Any) -> Any:
        if patch.scope == "init" and _INIT["over"]:
            return original(*args, **kwargs)
        if patch.site is not None and not _called_from(patch.site):
            return original(*args, **kwargs)
        if patch.every is not None:
            thinned[0] += 1
            if thinned[0] % patch.every == 0:
                return original(*args, **kwargs)
        if not impl:
            impl.append(_lookup(patch.replacement)[2])
        if not called[0]:
            called[0] = True
            _report(report, patch, "called")
            if patch.scope == "init":
                caller = sys._getframe(1)
                _report(
                    report, patch, f"{CALLED_FROM}{caller.f_code.co_filename}:{caller.f_lineno}"
                )
            elif patch.target.endswith(".__init__"):
                # a constructor does what every one does (a module draws its initial
                # weights): the place is the job's line that constructs the object
                from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line

                where = job_line((TORCH, PROJECT, DEEPSPEED), depth=2)
                if where is not None:
                    _report(report, patch, f"{CALLED_FROM}{where[0]}:{where[1]}")
        return impl[0](*args, **kwargs)

    patched.__name__ = getattr(original, "__name__", attr)
    patched.__qualname__ = getattr(original, "__qualname__", attr)
    patched._triage_patch = patch.target  # type: ignore[attr-defined]
    patched.__wrapped__ = original  # type: ignore[attr-defined]  # a replacement may call it
    new: Any = patched
    if isinstance(owner, type):
        # keep the descriptor kind, so the arguments a caller passes stay the same
        static = next((k.__dict__[attr] for k in owner.__mro__ if attr in k.__dict__), None)
        if isinstance(static, staticmethod):
            new = staticmethod(patched)
        elif isinstance(static, classmethod):
            new = classmethod(patched)
    setattr(owner, attr, new)
    _report(report, patch, "patched")


def apply_patches(spec: PatchFile) -> None:
    """Patch what is imported now; patch the rest when (if ever) it is imported."""
    pending: dict[str, list[Callable[[Any], None]]] = {}
    if spec.settings:
        from .settings import apply_settings

        def put(_torch: Any = None) -> None:
            apply_settings(spec.settings)

        if "torch" in sys.modules:
            put()
        else:  # not before the job imports torch itself (a launcher process never does)
            pending.setdefault("torch", []).append(put)
    if spec.seeds:
        from .seed_pins import install

        install(spec.seeds, spec.report, pending)
    if spec.outplace:
        from .outplace import install as install_outplace

        install_outplace(spec.outplace, spec.report, pending)
    if spec.restore_state:
        from .restore_state import install as install_restore

        install_restore(spec.restore_state, spec.report, pending)
    if spec.sync_grads:
        from .grad_sync import install as install_sync

        install_sync(spec.sync_grads, spec.report, pending)
    if spec.restore_globals:
        from .module_globals import install as install_globals

        install_globals(spec.restore_globals, spec.report, pending)
    if spec.fill_empty:
        from .empty_fill import install as install_fill

        install_fill(spec.fill_empty, spec.report, pending)
    if spec.follow:
        from .stated_values import install as install_follow

        install_follow(spec.follow, pending)
    if spec.tie_params:
        from .param_ties import install as install_ties

        install_ties(spec.tie_params, spec.report, pending)
    if spec.values:
        from .call_values import install as install_values

        install_values()
    for patch in spec.patches:
        if patch.module in sys.modules:
            _apply_patch(patch, spec.report)
        else:
            apply = functools.partial(_apply_after_import, patch, spec.report)
            pending.setdefault(patch.module, []).append(apply)
    if pending:
        on_import(pending)


def _apply_after_import(patch: FunctionPatch, report: str, _module: Any) -> None:
    _apply_patch(patch, report)


def patch_events(report: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Per target: in how many processes it was patched, and in how many then called."""
    out: dict[str, dict[str, set[int]]] = {}
    try:
        lines = open(report).read().splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            rec = json.loads(line)
            out.setdefault(rec["target"], {}).setdefault(rec["event"], set()).add(rec["pid"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a killed process
    return {t: {e: len(p) for e, p in ev.items()} for t, ev in out.items()}
