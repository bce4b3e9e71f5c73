"""The tracer: one gate decides whether anything is captured; it suspends itself for its own work.

Usage in-process::

    with Tracer(CaptureConfig(out_dir="traces/a", steps=(36, 37), level="op")) as tr:
        for step in range(start, end):
            tr.step(step)          # step `step` begins now (the previous one is flushed)
            train_one_step()

Injected (``triage trace -- COMMAND``), the tracer runs with ``auto_steps``: step
boundaries come from the config's ``step_function`` (each call begins a step), else from
the job's ``MetricLog.log(step, ...)`` calls (``log(k)`` ends step ``k``), else from
``DeepSpeedEngine.step`` (the index is the engine's ``global_steps`` before the step, so it
is right after a checkpoint resume) or ``torch.optim.Optimizer.step`` (counted from 0 in
each process). An optimizer stepped inside the engine's step does not count twice. Events
before the first step are the init phase (step ``INIT_STEP``, -1); an optimizer step there
(inside ``deepspeed.initialize``, say) is an init event, never a boundary.

Outside the step window nothing is hooked: no module hooks, no dispatch mode; collectives
and optimizer hooks check one boolean and return. Inside the window every digest is staged
on the device and read back once, at the step boundary (see :mod:`.digest`). The tracer
never runs a collective and never synchronises per op; tensor dumps (``dump`` patterns)
copy to the host and therefore do synchronise: use them on few named events.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import importlib.metadata
import inspect
import os
import re
import socket
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..import_hooks import on_import
from ..records import utcnow
from ..trace_format import INIT_STEP, TraceHeader
from . import collectives as coll
from .attribution import ScopeIndex
from .compiling import stand_aside, withdraw
from .config import CaptureConfig
from .digest import DigestMode, Staged, stage
from .sink import PendingEvent, TraceSink
from .uncompiled import keep_dynamo_out

_SKIP_CALLER = (
    os.sep + os.path.join("torch", ""),
    os.path.join("deepspeed", "comm", ""),
    os.path.join("triage_agent", "fingerprint", ""),
)


def _caller() -> str | None:
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not any(s in fn for s in _SKIP_CALLER):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return None


def _optimizer_tensors(opt: Any, p: torch.Tensor) -> tuple[list[str], list[torch.Tensor]]:
    """(names, tensors) an optimizer step reads and writes for ``p``: it, its grad, its state."""
    state = opt.state.get(p, {})
    keys = sorted(k for k, v in state.items() if isinstance(v, torch.Tensor))
    grad = [p.grad] if p.grad is not None else []
    return ["param", *(["grad"] if grad else []), *keys], [p, *grad, *(state[k] for k in keys)]


def _deepspeed_version() -> str | None:
    """The version of the DeepSpeed imported, else of the one a later import would load."""
    ds = sys.modules.get("deepspeed")
    version = getattr(ds, "__version__", None) if ds is not None else None
    if version is None:
        try:
            version = importlib.metadata.version("deepspeed")
        except importlib.metadata.PackageNotFoundError:
            return None
    return str(version)


def _tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors among ``obj``'s pytree leaves, in pytree order.

    The common shapes (a tensor; a plain tuple or list of tensors, scalars and None, one
    level deep) are walked directly; anything else goes through ``tree_leaves``.
    """
    if isinstance(obj, torch.Tensor):
        return [obj]
    tp = type(obj)
    if tp is tuple or tp is list:
        out = []
        for x in obj:
            if isinstance(x, torch.Tensor):
                out.append(x)
            elif isinstance(x, (list, tuple, dict)) or not isinstance(x, _FLAT_LEAVES):
                return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]
        return out
    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


def _op_tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors of an ATen call, in ``tree_leaves((args, kwargs))`` order.

    An ATen schema argument is a tensor, a scalar or a list of them (``Tensor?[]`` may hold
    None): one level of list is all there is, so no pytree walk is needed.
    """
    out = []
    for x in args:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif type(x) is list or type(x) is tuple:
            out.extend(t for t in x if isinstance(t, torch.Tensor))
    if kwargs:
        # pytree orders a dict by insertion, as ATen passes keyword arguments
        for x in kwargs.values():
            if isinstance(x, torch.Tensor):
                out.append(x)
            elif type(x) is list or type(x) is tuple:
                out.extend(t for t in x if isinstance(t, torch.Tensor))
    return out


_FLAT_LEAVES = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.Size)


class _OpInfo:
    """What the tracer needs to know of one ATen overload, computed once per overload."""

    __slots__ = ("name", "skip", "mutable", "seeded", "allocates")

    def __init__(self, func):
        name = func._schema.name
        self.skip = name.startswith("profiler::")  # record_function markers: no numerics
        if func._overloadname != "default":
            name = f"{name}.{func._overloadname}"
        self.name = name
        self.mutable = func._schema.is_mutable
        self.seeded = torch.Tag.nondeterministic_seeded in func.tags
        self.allocates = name.startswith(("aten::empty", "aten::new_empty"))


def _env_rank() -> int:
    for var in ("RANK", "LOCAL_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def _compiled_module(module: torch.nn.Module) -> str | None:
    """The class name of the module ``module`` compiles, where it is torch.compile's wrapper:
    its event marks a compiled region, which stands where that module runs in an eager run
    (same scope), and whose inner modules and fused ops no hook or mode sees."""
    inner = getattr(module, "_orig_mod", None)
    if type(module).__name__ == "OptimizedModule" and isinstance(inner, torch.nn.Module):
        return type(inner).__name__
    return None


class _OpMode(TorchDispatchMode):
    def __init__(self, tracer: Tracer):
        super().__init__()
        self.tracer = tracer

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        # Otherwise Dynamo declines every frame while the mode is active and a compiled run
        # traced at op level runs eager (other bits than untraced), or it traces the frame
        # with the mode seeing fake tensors. With it, the mode is off while torch.compile
        # traces and back on when the compiled code runs: ops the compiled code dispatches
        # (extern kernels, fallbacks) are seen, ops fused into generated kernels are not.
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tr = self.tracer
        if kwargs is None:
            kwargs = {}
        if not tr._active or tr._suspended:
            return func(*args, **kwargs)
        return tr._on_op(func, args, kwargs)


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    """``t``'s storage object: torch keeps one per storage while that storage lives."""
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


class Tracer:
    """Per-rank tracer. See the module docstring; settings come only from ``config``."""

    TRACER = "python"  # the trace header's name for this path

    def __init__(
        self,
        config: CaptureConfig,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        auto_steps: bool = False,
    ):
        self.config = config
        self.rank = _env_rank() if rank is None else rank
        self.world_size = world_size or int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.auto_steps = auto_steps
        self.enabled = config.level != "none" and config.traces_rank(self.rank)
        self.scopes = ScopeIndex()
        self._scope_re = re.compile(config.scope) if config.scope else None
        self.sink = TraceSink(Path(config.out_dir), self.rank, self._header())
        self.cur_step: int | None = None
        self.steps_seen: list[int] = []
        self._active = False
        self._suspended = 0
        self._compiling = None  # the compile callbacks while a window is traced
        self._seq = 0
        self._calls: dict[tuple[str, str], int] = {}
        self._events: list[PendingEvent] = []
        self._opt_inputs: dict[int, dict] = {}
        # (address, version) of an empty* output -> (its storage, that storage's address and
        # size, the output's dtype, shape, stride and offset, the digest of its bytes then)
        self._uninit: dict[tuple, tuple[weakref.ref, tuple, tuple, Staged]] = {}
        # open module calls: (scope, input digests, input copies for a dump or None)
        self._stack: list[tuple[str, list[Staged | None], tuple | None]] = []
        self._bwd_scope = ""
        self._handles: list[Any] = []
        self._mode: _OpMode | None = None
        # per-run memo tables for the hot path: all depend only on their key and the config
        self._ops: dict[Any, _OpInfo] = {}
        self._digest_modes: dict[str, DigestMode] = {}
        self._scope_ok: dict[str, bool] = {}
        self._patched: list[tuple[Any, str, Any]] = []
        self._finders: list[Any] = []  # import watchers (import_hooks.on_import), removed on close
        self._engine_seen = False
        self._engine_init = 0  # depth of DeepSpeedEngine.__init__ calls running
        self._in_optimizer = 0
        self._groups: dict[int, tuple[Any, list[int] | None]] = {}
        # where step boundaries come from (auto_steps): "function" (the config's
        # step_function), "metrics" (the job's MetricLog.log calls) or "optimizer"
        self._source = "function" if config.step_function else "optimizer"
        self._started = False  # a step has begun: the init phase is over
        self._first_label = 0  # the label of the first step when nothing better is known
        self.resumed_from: int | None = None  # the step the job declared it resumed from
        self._last_closed: int | None = None
        self._fn_depth = 0
        self._fn_calls = 0
        self._first_step_hooks: list[Any] = []  # undo callables, run once the first step begins
        self._pre_hooked = False  # _on_module_pre is registered (see _on_first_forward)
        self._engine_cls: type | None = None
        self._notes: list[str] = []
        # an injected launcher process (deepspeed, torchrun) never steps: it writes nothing
        self._real = not auto_steps
        self._in_engine_step = threading.local()
        self._installed = False
        self._closed = False
        self.digests_staged = 0  # for tests and benchmarks: how many digests were computed
        self.metric_files: list[str] = []  # the job's MetricLog files, as they are opened

    # -- lifecycle ---------------------------------------------------------------------
    def _header(self) -> TraceHeader:
        versions = {"torch": torch.__version__, "python": sys.version.split()[0]}
        versions["cuda"] = torch.version.cuda
        versions["deepspeed"] = _deepspeed_version()
        coords = {"rank": self.rank}
        if os.environ.get("LOCAL_RANK", "").isdigit():
            coords["local_rank"] = int(os.environ["LOCAL_RANK"])
        return TraceHeader(
            run_id=self.config.run_id,
            rank=self.rank,
            world_size=self.world_size,
            coords=coords,
            versions=versions,
            config=self.config.model_dump(mode="json"),
            created=utcnow(),
            host=socket.gethostname(),
            argv=list(sys.argv),
            tracer=self.TRACER,
        )

    def install(self) -> Tracer:
        if self._installed:
            return self
        self._installed = True
        if not self.enabled:
            return self
        self._watch_import("torch._dynamo", keep_dynamo_out)
        import torch.distributed as dist

        for name in coll.SPECS:
            orig = getattr(dist, name, None)
            if orig is not None:
                self._patch(dist, name, self._wrap_collective(name, orig))
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._opt_hook = register_optimizer_step_post_hook(self._on_optimizer_step)
        self._opt_pre_hook = register_optimizer_step_pre_hook(self._on_optimizer_pre)
        if self.auto_steps:
            self._watch_import("deepspeed.runtime.engine", self._patch_engine)
            self._watch_import("triage_agent.metrics", self._patch_metrics)
            if self.config.step_function:
                self._watch_step_function(self.config.step_function)
            else:
                self._await_first_step()
            self._begin(INIT_STEP)
        return self

    def _watch_import(self, target: str, patch) -> None:
        """Run ``patch(module)`` on ``target`` now if it is imported, else right after its import."""
        mod = sys.modules.get(target)
        if mod is not None:
            patch(mod)
            return

        def once_open(module) -> None:
            if not self._closed:
                patch(module)

        self._finders.append(on_import({target: [once_open]}))

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    def close(self, status: str = "ok", note: str = "") -> None:
        """Flush the open step, write the end record and status file, undo every patch."""
        if self._closed:
            return
        self._closed = True
        open_step = self.cur_step is not None and self.cur_step != INIT_STEP
        if self.auto_steps and open_step and self._source != "function" and not self._events:
            # the step a boundary opened after the last one: it never ran (a step function's
            # last call is open until now, and did run)
            self.steps_seen.pop()
            self.cur_step = None
        if self.cur_step is not None and self._active and self._real:
            self._end_step()
        self._deactivate()
        self._first_step_begins()
        for finder in self._finders:
            # left in place, a later import would patch code for a tracer that is gone
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
        self._finders.clear()
        for owner, name, orig in reversed(self._patched):
            setattr(owner, name, orig)
        self._patched.clear()
        if hasattr(self, "_opt_hook"):
            self._opt_hook.remove()
            self._opt_pre_hook.remove()
        if self._source == "function" and not self._fn_calls:
            self._notes.append(f"the step function {self.config.step_function} was never called")
        if self.enabled and self._real:
            note = "; ".join([*self._notes, note] if note else self._notes)
            self.sink.close(status, self.steps_seen, note, resumed_from=self.resumed_from)

    def __enter__(self) -> Tracer:
        return self.install()

    def __exit__(self, exc_type, exc, tb) -> None:
        note = "" if exc is None else f"{exc_type.__name__}: {exc}"[:500]
        self.close("ok" if exc is None else "error", note)

    # -- steps -------------------------------------------------------------------------
    def step(self, n: int) -> None:
        """Step ``n`` begins now; the open step (if any) is flushed first."""
        self._real = True
        if self.cur_step is not None:
            self._end_step()
        self._begin(n)

    def end_step(self) -> None:
        if self.cur_step is not None:
            self._end_step()

    def _begin(self, n: int) -> None:
        self.cur_step = n
        if n != INIT_STEP:
            self.steps_seen.append(n)
        if self.enabled and self.config.in_window(n):
            self._activate()

    def _end_step(self) -> None:
        step = self.cur_step
        was_active = self._active
        self._deactivate()
        if was_active and step is not None and (self._events or step != INIT_STEP):
            self._suspended += 1
            try:
                self.sink.write_step(step, self._events)
            finally:
                self._suspended -= 1
        if step is not None and step != INIT_STEP:
            self._last_closed = step
        self._events = []
        self._calls.clear()
        self._uninit.clear()
        self.cur_step = None

    # Automatic boundaries (auto_steps). Events before the first step are the init phase,
    # step INIT_STEP. The first step begins at the step function's first call or, without
    # one, at the first DeepSpeed engine call, the first module forward with grad enabled
    # or the first backward, whichever comes first. An optimizer step before that (inside
    # deepspeed.initialize, say) is an init event, never a boundary.
    def _start_step(self, n: int) -> None:
        self._first_step_begins()
        self._started = True
        self.step(n)

    def _await_first_step(self) -> None:
        mm = torch.nn.modules.module
        handle = mm.register_module_forward_pre_hook(self._on_first_forward)
        self._first_step_hooks.append(handle.remove)
        ag = torch.autograd
        for name in ("backward", "grad"):
            orig = getattr(ag, name)
            self._first_step_hooks.append(functools.partial(setattr, ag, name, orig))
            setattr(ag, name, self._first_backward(orig))

    def _first_step_begins(self) -> None:
        for undo in reversed(self._first_step_hooks):
            undo()
        self._first_step_hooks.clear()

    def _on_first_forward(self, module, args):
        hooked = self._pre_hooked
        engine = self._engine_cls
        if (
            not self._started
            and not self._engine_init
            and torch.is_grad_enabled()
            and not (engine is not None and isinstance(module, engine))
        ):
            self._start_step(self._first_label)
        if not hooked and self._pre_hooked:
            # the step begun here registered the module pre-hook, too late for this call
            return self._on_module_pre(module, args)
        return None

    def _first_backward(self, orig):
        @functools.wraps(orig)
        def backward(*args, **kwargs):
            if not self._started and not self._engine_init:
                self._start_step(self._first_label)
            return orig(*args, **kwargs)

        return backward

    def _close_reported(self, k: int) -> None:
        """The job reported step ``k`` (MetricLog.log): the open step ends, labelled ``k``."""
        if self._last_closed is not None and k <= self._last_closed:
            return  # a step already closed, logged again (a second log, another counter)
        if not self._started:
            # nothing marked a start: everything so far is this step's
            self._first_step_begins()
            self._started = True
        elif self.cur_step is not None:
            self.steps_seen.pop()
        self._real = True
        self.steps_seen.append(k)
        if self._active and not self.config.in_window(k):
            self._deactivate()  # the step's label was foreseen wrongly: not in the window
            self._events = []
        for ev in self._events:
            ev.step = k
        self.cur_step = k
        self._end_step()
        self._begin(k + 1)

    def _patch_metrics(self, module) -> None:
        cls = getattr(module, "MetricLog", None)
        if cls is None:
            return
        tracer = self
        orig_init, orig_log = cls.__init__, cls.log
        sig = inspect.signature(orig_init)

        @functools.wraps(orig_init)
        def __init__(log, *args, **kwargs):
            orig_init(log, *args, **kwargs)
            tracer.metric_files.append(str(Path(log.file).resolve()))
            if tracer._source == "optimizer":
                tracer._source = "metrics"
            resumed = sig.bind(log, *args, **kwargs).arguments.get("resumed_from")
            if resumed is not None and not tracer._started:
                tracer.resumed_from = int(resumed)
                tracer._first_label = int(resumed) + 1
                if tracer._source == "metrics" and not tracer._engine_init:
                    # the process that resumes declares here where step K+1 begins (the
                    # state capture reads the same line): its batch loading is the step's,
                    # as it is in the run that went on after logging step K
                    tracer._start_step(tracer._first_label)

        @functools.wraps(orig_log)
        def log(metric_log, step, *args, **kwargs):
            tracer._suspended += 1  # reading the metrics out is the job's report, not its work
            try:
                result = orig_log(metric_log, step, *args, **kwargs)
            finally:
                tracer._suspended -= 1
            if tracer._source == "metrics" and not tracer._closed:
                try:
                    k = int(step)
                except (TypeError, ValueError):  # a step MetricLog took but no step number
                    return result
                tracer._close_reported(k)
            return result

        self._patch(cls, "__init__", __init__)
        self._patch(cls, "log", log)

    def _watch_step_function(self, spec: str) -> None:
        mod, qual = spec.split(":", 1)
        if mod == "__main__":
            self._watch_main(qual)
        else:
            self._watch_import(mod, lambda module: self._patch_step_function(module, qual))

    def _patch_step_function(self, module, qual: str) -> bool:
        owner = module
        *path, name = qual.split(".")
        try:
            for part in path:
                owner = getattr(owner, part)
            raw = inspect.getattr_static(owner, name)
        except AttributeError:
            self._notes.append(
                f"step function {module.__name__}:{qual} not found: steps come from the "
                "job's MetricLog or its optimizer instead"
            )
            self._source = "optimizer"
            if not self._started:
                self._await_first_step()
            return False
        kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
        func = raw.__func__ if kind else raw
        tracer = self

        @functools.wraps(func)
        def step_function(*args, **kwargs):
            if tracer._fn_depth == 0:
                tracer._start_step(tracer._fn_calls)
                tracer._fn_calls += 1
            tracer._fn_depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                tracer._fn_depth -= 1

        self._patch(owner, name, kind(step_function) if kind else step_function)
        return True

    def _watch_main(self, qual: str) -> None:
        """A step function of the script itself: found at its first call, patched for the rest.

        The script's functions do not exist yet when the tracer is installed, and no import
        announces them, so a profile hook watches calls until the first call of ``qual``
        (that call is step 0), patches ``qual`` for every later call and removes itself.
        """
        prev = sys.getprofile()

        def watch(frame, event, arg):
            if event != "call" or frame.f_code.co_qualname != qual:
                return
            if frame.f_globals.get("__name__") != "__main__":
                return
            self._start_step(self._fn_calls)  # removes this hook
            self._fn_calls += 1
            self._patch_step_function(sys.modules["__main__"], qual)

        def unwatch() -> None:
            if sys.getprofile() is watch:
                sys.setprofile(prev)

        sys.setprofile(watch)
        self._first_step_hooks.append(unwatch)

    def _activate(self) -> None:
        keep_dynamo_out()  # the tracer's modules loaded since torch._dynamo was
        self._active = True
        self._seq = 0
        self._compiling = stand_aside(self, self._compiling)
        level = self.config.level
        if level in ("module", "op"):
            mm = torch.nn.modules.module
            self._handles.append(mm.register_module_forward_pre_hook(self._on_module_pre))
            self._pre_hooked = True
            self._handles.append(mm.register_module_forward_hook(self._on_module_post))
        if level == "op":
            self._mode = _OpMode(self)
            self._mode.__enter__()

    def _deactivate(self) -> None:
        self._active = False
        self._pre_hooked = False
        withdraw(self._compiling)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        self._stack.clear()

    def _gate(self) -> bool:
        return self._active and not self._suspended

    # -- recording ---------------------------------------------------------------------
    def _mode_for(self, name: str) -> DigestMode:
        mode = self._digest_modes.get(name)
        if mode is None:
            mode = self.config.digest
            if mode == "xor" and any(fnmatch.fnmatchcase(name, p) for p in self.config.order_names):
                mode = "both"
            self._digest_modes[name] = mode
        return mode

    def _stage(self, t: torch.Tensor, mode: DigestMode) -> Staged | None:
        """Stage ``t``'s digest now: nothing is reused from an earlier event.

        A digest taken at an earlier event could be stale whatever the version counter
        says: ``t.data`` is an alias with a counter of its own, and kernels outside the
        dispatcher (C++ extensions such as DeepSpeedCPUAdam, multi_tensor_apply, numpy
        views) bump none. Only the tensors of one event share digests (see
        :meth:`_stage_all`).

        Memory an ``empty*`` op returned is recorded as uninitialised while its bytes are
        still the ones it was allocated with: the digest of the whole allocation is taken
        again and compared with the one taken at allocation when the step is read back, so
        a write nobody saw (an alias of another address, a kernel outside the dispatcher)
        makes it an ordinary digest.

        The entry is trusted only while the storage the op returned lives at the same
        address and size and ``t`` reads that very storage: once freed (the tensor died, or
        had its storage swapped by ``.data =`` or ``set_``) or resized, its old address goes
        to another tensor, at version 0 too, whose bytes the old digest says nothing about.
        Whether one lands there is the allocator's choice, so trusting the entry then would
        make the record differ between launches.
        """
        if self._uninit:
            key = self._uninit_key(t)
            entry = self._uninit.get(key) if key is not None else None
            if entry is not None:
                st = entry[0]()
                if st is None or (st.data_ptr(), st.nbytes()) != entry[1]:
                    del self._uninit[key]  # this memory is someone else's now
                elif _storage(t) is st:
                    s = stage(t, mode)
                    dtype, shape, stride, offset = entry[2]
                    same = t.dtype == dtype and t.shape == shape and t.stride() == stride
                    if same:
                        now = s
                    else:  # the whole allocation, as the op returned it
                        whole = torch.empty(0, dtype=dtype, device=st.device)
                        now = stage(whole.set_(st, offset, shape, stride), mode)
                    self.digests_staged += 1 if same else 2
                    if s is not None and now is not None:
                        s.pristine = (entry[3], now)
                    return s
        s = stage(t, mode)
        self.digests_staged += 1
        return s

    def _allocated(self, t: torch.Tensor, mode: DigestMode) -> Staged | None:
        """The output of an ``empty*`` op: recorded as uninitialised, its bytes remembered.

        The digest of the bytes stays in the record beside the sentinel: whether memory
        counts as unwritten depends on what the allocator left there, and a comparison that
        finds the sentinel on one side only compares the bytes instead.
        """
        key = self._uninit_key(t)
        s = stage(t, mode)
        self.digests_staged += 1
        st = _storage(t) if key is not None else None
        if st is None or s is None or s.numel == 0:
            return s
        s.uninitialized = True
        layout = (t.dtype, t.shape, t.stride(), t.storage_offset())
        self._uninit[key] = (weakref.ref(st), (st.data_ptr(), st.nbytes()), layout, s)
        return s

    @staticmethod
    def _uninit_key(t: torch.Tensor) -> tuple | None:
        """(address, version) of memory an ``empty*`` op returned; see :meth:`_stage`."""
        try:
            ptr = t.data_ptr()
            return (ptr, t._version) if ptr else None
        except (RuntimeError, NotImplementedError):  # inference tensors, no storage
            return None

    def _stage_all(
        self, ts: list[torch.Tensor], mode: DigestMode, allocated: bool = False
    ) -> list[Staged | None]:
        """Digests of one event's tensors; ``allocated`` for the outputs of an ``empty*`` op."""
        if not ts:
            return []
        self._suspended += 1
        # Outside an op (module hooks, collectives, optimizer) the dispatch mode is still on
        # the stack: every digest kernel would pass through Python to be turned away.
        # Step it aside while staging; inside an op torch has already popped it.
        popped = None
        mode_obj = self._mode
        if mode_obj is not None:
            n = torch._C._len_torch_dispatch_stack()
            if n and torch._C._get_dispatch_stack_at(n - 1) is mode_obj:
                popped = torch._C._pop_torch_dispatch_stack(None)
        try:
            if allocated:
                return [self._allocated(t, mode) for t in ts]
            if len(ts) == 1:
                return [self._stage(ts[0], mode)]
            # One event's tensors are read at one moment: the same bytes twice (mm(x, x), a
            # weight tied to another) are hashed once.
            out: list[Staged | None] = []
            seen: dict[tuple, Staged | None] = {}
            for t in ts:
                try:
                    key = (t.data_ptr(), t.shape, t.stride(), t.dtype)
                except (RuntimeError, NotImplementedError):
                    key = None
                if key is None or not key[0]:
                    out.append(self._stage(t, mode))
                    continue
                if key not in seen:
                    seen[key] = self._stage(t, mode)
                out.append(seen[key])
            return out
        finally:
            if popped is not None:
                torch._C._push_on_torch_dispatch_stack(popped)
            self._suspended -= 1

    def _scope(self) -> str:
        if self._stack:
            return self._stack[-1][0]
        return self._bwd_scope if self._in_backward() else ""

    def _in_scope(self, scope: str) -> bool:
        if self._scope_re is None:
            return True
        ok = self._scope_ok.get(scope)
        if ok is None:
            ok = self._scope_ok[scope] = bool(self._scope_re.search(scope))
        return ok

    def _wants_dump(self, name: str, scope: str) -> bool:
        pats = self.config.dump
        if not pats:
            return False
        return any(
            fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(f"{scope}:{name}", p) for p in pats
        )

    def _new_event(self, kind: str, name: str, scope: str, phase: str, inputs, caller=None):
        key = (scope, name)
        call = self._calls.get(key, 0)
        self._calls[key] = call + 1
        self._real = True
        ev = PendingEvent(
            seq=self._seq,
            step=self.cur_step if self.cur_step is not None else -1,
            kind=kind,
            name=name,
            scope=scope,
            call=call,
            phase=phase,
            caller=caller,
            inputs=inputs,
        )
        self._seq += 1
        self._events.append(ev)
        return ev

    def _dump(
        self,
        ev: PendingEvent,
        inputs: list | None,
        outputs: list,
        call: tuple | None = None,
        names: tuple[list[str], list[str]] | None = None,
    ) -> None:
        """Save an event's tensors for byte confirmation and replay.

        ``inputs`` are CPU copies taken before the event ran, in the order of its input
        digests; ``names`` (input names, output names) says what each one is where the
        position alone does not (a module's own weights, an optimizer's state). For an op,
        ``call`` is (args, kwargs) with tensors already copied to the CPU: the dump is then a
        full call record (op, args, kwargs, device) that replays as is.
        """
        self._suspended += 1
        try:
            rel = Path("dumps") / f"rank{self.rank:05d}" / f"s{ev.step}_e{ev.seq}.pt"
            path = Path(self.config.out_dir) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            cpu = [t.detach().to("cpu", copy=True) for t in outputs]
            rec = {"name": ev.name, "scope": ev.scope, "inputs": inputs, "outputs": cpu}
            if names is not None:
                rec["input_names"], rec["output_names"] = names
            if call is not None:
                device = str(outputs[0].device) if outputs else "cpu"
                rec.update(op=ev.name, args=call[0], kwargs=call[1], device=device)
            from ..settings import read_settings

            # the settings the op ran under: a replay elsewhere runs under them too
            rec["settings"] = read_settings()
            torch.save(rec, path)
            ev.dump = str(rel)
        finally:
            self._suspended -= 1

    def _call_copy(self, args: tuple, kwargs: dict) -> tuple | None:
        """(args, kwargs) with tensors as CPU copies, or None if a value would not reload."""
        ok = (int, float, bool, str, type(None), torch.dtype)

        def conv(x):
            if isinstance(x, torch.Tensor):
                return x.detach().to("cpu", copy=True)
            if isinstance(x, (list, tuple)):
                return [conv(v) for v in x]
            if isinstance(x, ok):
                return x
            raise TypeError(type(x).__name__)

        self._suspended += 1
        try:
            return [conv(a) for a in args], {k: conv(v) for k, v in kwargs.items()}
        except TypeError:
            return None
        finally:
            self._suspended -= 1

    def _cpu_copies(self, ts: list[torch.Tensor]) -> list[torch.Tensor]:
        self._suspended += 1
        try:
            return [t.detach().to("cpu", copy=True) for t in ts]
        finally:
            self._suspended -= 1

    # ops
    def _on_op(self, func, args, kwargs):
        info = self._ops.get(func)
        if info is None:
            info = self._ops[func] = _OpInfo(func)
        if info.skip:
            return func(*args, **kwargs)
        stack = self._stack
        if stack:
            scope, phase = stack[-1][0], "forward"
        elif torch._C._current_autograd_node() is not None:
            scope, phase = self._bwd_scope, "backward"
        else:
            scope, phase = "", ("optimizer" if self._in_optimizer else "other")
        if self._scope_re is not None and not self._in_scope(scope):
            return func(*args, **kwargs)
        name = info.name
        mode = self._mode_for(name)
        ins = _op_tensors(args, kwargs)
        staged_in = self._stage_all(ins, mode)  # before the op: in-place ops mutate inputs
        dump = self._wants_dump(name, scope)
        dumped_in = self._cpu_copies(ins) if dump else None
        call = self._call_copy(args, kwargs) if dump else None
        rng = self._generator_digest(ins) if info.seeded else None
        mutable = info.mutable
        if mutable and self._uninit:
            for t in ins:  # written by this op: no longer uninitialised
                self._uninit.pop(self._uninit_key(t), None)
        out = func(*args, **kwargs)
        # an in-place update is structural: one run may make it where the other does not; a
        # draw moves a generator every later draw shares: both name the job's line that ran them,
        # as does an op asked for by name (a dump)
        caller = _caller() if mutable or info.seeded or dump else None
        ev = self._new_event("op", name, scope, phase, staged_in, caller=caller)
        outs = _tensors(out)
        ev.outputs = self._stage_all(outs, mode, allocated=info.allocates)
        if rng is not None:
            # A random op's hidden input: the generator state it drew from.
            ev.meta["rng"] = rng
        if dump:
            self._dump(ev, dumped_in, outs, call)
        return out

    def _generator_digest(self, ins: list[torch.Tensor]) -> str:
        device = ins[0].device if ins else torch.device("cpu")
        if device.type == "cuda":
            gen = torch.cuda.default_generators[device.index or 0]
        else:
            gen = torch.default_generator
        state = gen.get_state()  # host-side bytes for CPU and CUDA (seed, offset): no sync
        return hashlib.blake2b(bytes(state.untyped_storage()), digest_size=8).hexdigest()

    def _phase(self) -> str:
        if self._stack:
            return "forward"
        if self._in_backward():
            return "backward"
        return "optimizer" if self._in_optimizer else "other"

    @staticmethod
    def _in_backward() -> bool:
        return torch._C._current_autograd_node() is not None

    # modules
    def _on_module_pre(self, module, args):
        # Inside a frame torch.compile traces, the hook would be traced too (and Dynamo
        # fails on the tracer's own state): the compiled region's modules are not seen.
        if torch.compiler.is_compiling() or not self._gate():
            return None
        parent = self._stack[-1][0] if self._stack else None
        scope = self.scopes.name_of(module, parent)
        name = type(module).__name__
        staged, dumped = [], None
        if self._in_scope(scope):
            # The module's own weights and buffers are inputs too: without them a changed
            # weight reads as "equal inputs, different output" and the module as an origin.
            own = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
            ins = _tensors(args)
            tensors = ins + [t for _, t in own]
            staged = self._stage_all(tensors, self._mode_for(name))
            if self._wants_dump(name, scope):
                names = [f"input{i}" for i in range(len(ins))] + [n for n, _ in own]
                dumped = (self._cpu_copies(tensors), names)
        self._stack.append((scope, staged, dumped))
        return None

    def _on_module_post(self, module, args, output):
        if torch.compiler.is_compiling() or not self._active or not self._stack:
            return None
        scope, staged_in, dumped = self._stack.pop()
        if self._suspended or not self._in_scope(scope):
            return None
        name = type(module).__name__
        mode = self._mode_for(name)
        # the job's line that called it: an extra call of a module names the function to test
        ev = self._new_event("module", name, scope, "forward", staged_in, caller=_caller())
        compiled = _compiled_module(module)
        if compiled is not None:
            ev.meta["compiled"] = compiled
        outs = _tensors(output)
        ev.outputs = self._stage_all(outs, mode)
        if dumped is not None:
            copies, in_names = dumped
            out_names = [f"output{i}" for i in range(len(outs))]
            self._dump(ev, copies, outs, names=(in_names, out_names))
        for i, t in enumerate(outs):
            if t.requires_grad and t.grad_fn is not None:
                t.register_hook(functools.partial(self._on_module_grad, scope, name, i))
        return None

    def _on_module_grad(self, scope: str, name: str, index: int, grad: torch.Tensor | None):
        self._bwd_scope = scope
        # an output no loss depends on (a recurrent layer's last hidden state) gets no gradient
        if grad is not None and self._gate():
            ev = self._new_event("module", name, scope, "backward", [])
            ev.meta["grad_of_output"] = index
            ev.outputs = self._stage_all([grad], self._mode_for(name))
        return None

    # collectives
    def _wrap_collective(self, fname: str, orig):
        in_names, out_names = coll.SPECS[fname]
        sig = inspect.signature(orig)
        tracer = self

        @functools.wraps(orig)
        def traced(*args, **kwargs):
            if not tracer._gate():
                return orig(*args, **kwargs)
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return orig(*args, **kwargs)  # let torch raise its own error
            bound.apply_defaults()
            params = bound.arguments
            mode = tracer._mode_for(fname)
            ins = _tensors([params.get(n) for n in in_names])
            scope = tracer._scope()
            ev = tracer._new_event(
                "collective", fname, scope, tracer._phase(), [], caller=_caller()
            )
            ev.inputs = tracer._stage_all(ins, mode)
            dumped = tracer._cpu_copies(ins) if tracer._wants_dump(fname, scope) else None
            is_async = fname in coll.ALWAYS_ASYNC or bool(params.get("async_op", False))
            op = params.get("op")
            ev.meta = {"async": is_async}
            if op is not None:
                ev.meta["op"] = str(op).rsplit(".", 1)[-1]
            members = tracer._group_ranks(params.get("group"))
            if members is not None:
                ev.meta["group"] = members
            step_at_launch = tracer.cur_step
            tracer._suspended += 1
            try:
                work = orig(*args, **kwargs)
            finally:
                tracer._suspended -= 1

            def complete() -> None:
                if tracer.cur_step != step_at_launch or not tracer._active:
                    ev.meta["completed"] = "after the step was written"
                    return
                outs = _tensors([params.get(n) for n in out_names])
                ev.outputs = tracer._stage_all(outs, mode)
                ev.meta["completed"] = "wait" if is_async else "return"
                if dumped is not None:
                    tracer._dump(ev, dumped, outs)

            if is_async and work is not None:
                ev.meta["completed"] = "not waited before the step ended"
                return coll.TracedWork(work, complete)
            complete()
            return work

        return traced

    def _group_ranks(self, group: Any) -> list[int] | None:
        """The global ranks of a collective's process group; None for the default group.

        Read once per group object: a reader that checks ranks against each other (the
        sentinel's device check) must know which ranks were meant to hold equal buffers.
        """
        if group is None:
            return None
        key = id(group)
        if key not in self._groups:
            import torch.distributed as dist

            try:
                members = list(dist.get_process_group_ranks(group))
                if group is dist.GroupMember.WORLD or members == list(range(self.world_size)):
                    members = None
            except (RuntimeError, ValueError, AttributeError):
                members = None
            self._groups[key] = (group, members)  # the group is held so its id stays its own
        return self._groups[key][1]

    # optimizer
    def _on_optimizer_pre(self, opt, args, kwargs) -> None:
        self._in_optimizer += 1
        # the sentinel keeps what the step wrote, not what it read: its inputs are the
        # collectives' outputs (gradients) and the previous step's parameters
        if self._gate() and self.config.level != "sentinel":
            # The step's inputs: each parameter, its gradient and its state before the update
            # (staged now, on the stream the update will run on, so they read the old values).
            pre = {}
            oname = type(opt).__name__
            for g, group in enumerate(opt.param_groups):
                # what the update reads besides tensors: the group's hyper-parameters and
                # the parameter's scalar state (a step count kept as a number)
                hyper = {k: repr(v) for k, v in group.items() if k != "params"}
                for i, p in enumerate(group["params"]):
                    names, ts = _optimizer_tensors(opt, p)
                    dump = self._wants_dump(self._param_name(p, g, i), oname)
                    copies = self._cpu_copies(ts) if dump else None
                    scalars = {
                        f"state.{k}": repr(v)
                        for k, v in opt.state.get(p, {}).items()
                        if not isinstance(v, torch.Tensor)
                    }
                    staged = self._stage_all(ts, self.config.digest)
                    pre[(g, i)] = (names, staged, copies, {**hyper, **scalars})
            self._opt_inputs[id(opt)] = pre

    def _param_name(self, p: torch.Tensor, group: int, index: int) -> str:
        return self.scopes.param_names.get(id(p), f"group{group}.param{index}")

    def _on_optimizer_step(self, opt, args, kwargs) -> None:
        self._in_optimizer = max(0, self._in_optimizer - 1)
        if self._gate():
            self._record_optimizer(opt)
        if not (self.auto_steps and self._source == "optimizer" and self._started):
            return
        engine_step = getattr(self._in_engine_step, "depth", 0) > 0
        if not self._engine_seen and not engine_step and not self._engine_init:
            n = self.cur_step
            self.step((n if n is not None else -1) + 1)

    def _record_optimizer(self, opt: torch.optim.Optimizer) -> None:
        caller = _caller()
        oname = type(opt).__name__
        pre = self._opt_inputs.pop(id(opt), {})
        if self.config.level == "sentinel":
            self._record_written(opt, caller, oname)
            return
        for g, group in enumerate(opt.param_groups):
            for i, p in enumerate(group["params"]):
                names, tensors = _optimizer_tensors(opt, p)
                in_names, staged_in, copies, hyper = pre.get((g, i), ([], [], None, None))
                pname = self._param_name(p, g, i)
                ev = self._new_event(
                    "optimizer", pname, oname, "optimizer", staged_in, caller=caller
                )
                ev.outputs = self._stage_all(tensors, self.config.digest)
                state = opt.state.get(p, {})
                ev.meta = {
                    "inputs": in_names,
                    "tensors": names,
                    "scalars": {
                        k: repr(v) for k, v in state.items() if not isinstance(v, torch.Tensor)
                    },
                    "group": g,
                }
                if hyper is not None:
                    ev.meta["hyper"] = hyper
                if copies is not None:
                    self._dump(ev, copies, tensors, names=(in_names, names))

    def _record_written(self, opt: torch.optim.Optimizer, caller: str | None, oname: str) -> None:
        """The sentinel's record of a step: each parameter as the optimizer left it.

        All of the step's parameters are staged in one call (one native call on the C++
        path): the always-on level pays its host work once per step, not once per tensor.
        """
        held = [
            (g, i, p) for g, grp in enumerate(opt.param_groups) for i, p in enumerate(grp["params"])
        ]
        staged = self._stage_all([p for _, _, p in held], self.config.digest)
        for (g, i, p), s in zip(held, staged, strict=True):
            ev = self._new_event(
                "optimizer", self._param_name(p, g, i), oname, "optimizer", [], caller=caller
            )
            ev.outputs = [s]
            ev.meta = {"tensors": ["param"], "group": g}

    # DeepSpeed engine
    def _patch_engine(self, module) -> None:
        cls = getattr(module, "DeepSpeedEngine", None)
        if cls is None or getattr(cls, "_triage_patched", False):
            return
        tracer = self
        orig_init, orig_forward, orig_step = cls.__init__, cls.forward, cls.step

        @functools.wraps(orig_init)
        def __init__(engine, *args, **kwargs):
            # deepspeed.initialize may step the optimizer (ZeRO initialises its state so):
            # that is init work, not a training step
            tracer._engine_init += 1
            try:
                orig_init(engine, *args, **kwargs)
            finally:
                tracer._engine_init -= 1

        @functools.wraps(orig_forward)
        def forward(engine, *args, **kwargs):
            tracer._sync_engine_step(engine)
            return orig_forward(engine, *args, **kwargs)

        @functools.wraps(orig_step)
        def step(engine, *args, **kwargs):
            tracer._sync_engine_step(engine)
            before = engine.global_steps
            local = tracer._in_engine_step
            local.depth = getattr(local, "depth", 0) + 1
            try:
                result = orig_step(engine, *args, **kwargs)
            finally:
                local.depth -= 1
            steps_here = tracer._source == "optimizer"
            if steps_here and engine.global_steps != before and tracer.cur_step is not None:
                tracer._end_step()
            return result

        self._patch(cls, "__init__", __init__)
        self._patch(cls, "forward", forward)
        self._patch(cls, "step", step)
        cls._triage_patched = True
        self._patched.append((cls, "_triage_patched", False))
        self._engine_cls = cls

    def _sync_engine_step(self, engine) -> None:
        """An engine call: the engine's step counter names the step (right after a resume)."""
        if self._engine_init:
            return
        self._engine_seen = True
        n = int(engine.global_steps)
        if not self._started:
            if self._source != "function":
                self._start_step(n)
        elif self._source == "optimizer" and self.cur_step != n:
            self.step(n)
