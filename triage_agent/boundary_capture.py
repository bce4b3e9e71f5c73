"""State at step boundaries, captured inside every process of a run by the injected bootstrap.

When ``TRIAGE_STATE_CAPTURE`` names a :class:`BoundaryConfig`, each process writes a
:class:`~triage_agent.manifest.BoundaryRecord` (one JSON file) at these points:

- ``init``: the first forward with grad enabled in a process that did not resume, i.e.
  initialisation is over and step 0 begins;
- ``after-K``: the job reported step ``K`` (``MetricLog.log(K)`` returned), or a process
  resumed from ``K`` (``MetricLog(..., resumed_from=K)``): the state step ``K+1`` starts from;
- ``step-K+1``: the first forward with grad enabled after ``after-K``, once the job has done
  what it does between steps (an epoch hook, a loader's next batch). Its ``batch.*`` tensors
  are the inputs step ``K+1`` consumed.

Each record holds parameters, optimizer state (for a DeepSpeed engine its wrapper's: master
weights, moments, step counters), schedulers, every RNG stream and the data cursors: objects
of the job's own classes with ``state_dict``/``load_state_dict`` whose state is plain values,
a DataLoader iterator's count of batches yielded, a sampler's epoch. From ``after-K`` to
``step-K+1`` every write to an attribute of those cursors is recorded with the function it
came through and the job's frame that called it: what moved a cursor between two steps.

Only reads: nothing here draws a random number or changes a value the job computes with.
With ``stop`` the process exits (status 0) once ``step-K+1`` is written: the steps after it
add nothing to what the record says. Without it the run goes on to its end as it would
without the capture (a baseline launched when the mismatch step is known beforehand carries
it, and its records spare the state relaunch).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import os
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from .job_objects import (
    PLAIN,
    by_param,
    cursor_state,
    data_cursors,
    live_objects,
    module_globals,
    own_class,
    root_modules,
    saved_keys,
    unsaved_attrs,
)
from .module_structure import grads, structure, unsaved_buffers

# imported here, before install() watches the job's own imports: a module of this
# package imported at start-up would look like one of the job's
from .site_chain import chain_next as chain

STATE_ENV = "TRIAGE_STATE_CAPTURE"
_C = TypeVar("_C", bound=BaseModel)


class BoundaryConfig(BaseModel):
    out_dir: str
    after_step: int | None = Field(
        default=None, description="K: capture after step K and at step K+1's first forward"
    )
    init: bool = Field(default=True, description="capture at the first step's first forward")
    stop: bool = Field(default=True, description="exit once step K+1's record is written")
    stop_only_resumed: bool = Field(
        default=False,
        description="a run of several commands: only a resumed process stops; the one before "
        "goes on to its end, where it writes the checkpoint the next one resumes from",
    )


def process_rank() -> int:
    """This process's rank as the launcher set it (0 for a single process)."""
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")) or 0)


def write_report(out_dir: str, name: str, rec: BaseModel) -> None:
    """Write ``rec`` as ``out_dir/name`` whole or not at all: a reader never sees half a
    report of a process killed mid-write."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(rec.model_dump_json())
    os.replace(tmp, path)


def read_reports(d: Path, pattern: str, model: type[_C]) -> list[_C]:
    """The reports :func:`write_report` left in ``d`` under names matching ``pattern``, in
    name order; one that does not parse (a process killed while writing) is not evidence."""
    out = []
    for p in sorted(d.glob(pattern)):
        try:
            out.append(model.model_validate_json(p.read_text()))
        except (OSError, ValueError):
            continue
    return out


def startup_config(env: str, model: type[_C], what: str) -> _C | None:
    """The config the file named by ``env`` holds, None when ``env`` is unset. An unreadable
    one ends the process with one line: the job must not run unobserved."""
    path = os.environ.get(env)
    if not path:
        return None
    try:
        return model.model_validate_json(Path(path).read_text())
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"triage {what}: cannot read {path}: {str(exc).splitlines()[0]}\n")
        os._exit(2)


UNSAVED = "{name}.unsaved"


def cursor_states(cursors: dict[str, Any]) -> dict[str, Any]:
    """Each cursor's position, and for a job's own object with a state_dict what that
    state_dict leaves out (also when what it saves is not plain: a trainer saving its model
    beside its counters loses the counters it leaves out all the same)."""
    out: dict[str, Any] = {}
    for name, o in cursors.items():
        state = cursor_state(o)
        if state is not None:
            out[name] = state
        if not own_class(type(o)):
            continue
        keys = state if state is not None else saved_keys(o)
        if keys is not None and (left := unsaved_attrs(o, keys)):
            out[UNSAVED.format(name=name)] = left
    return out


UNTOUCHED = "untouched since the process started"


def state_now(
    batch: tuple | None = None, label: str = "", rng_start: dict[str, str] | None = None
) -> Any:
    """The manifest of this process's training state now (see the module docstring)."""
    import torch

    from .manifest import build_manifest, tensor_entry

    roots = sorted(root_modules(), key=lambda m: -sum(p.numel() for p in m.parameters()))
    engine = next(
        (m for m in roots if type(m).__name__ in ("DeepSpeedEngine", "PipelineEngine")), None
    )
    if engine is not None:
        m = build_manifest(engine, label=label)
        # a DeepSpeed optimizer holds flat partitions, not the module's tensors: no membership
        for key, value in structure(engine.module, []).items():
            m.scalars[f"model_structure.{key}"] = value
        for key, t in unsaved_buffers(engine.module).items():
            m.tensors[f"model_unsaved.{key}"] = tensor_entry(t)
    else:
        state: dict[str, Any] = {}
        if roots:
            model = roots[0]
            if type(model).__name__ == "OptimizedModule":
                # torch.compile's wrapper: its state names carry `_orig_mod.`, an eager run's not
                model = model._orig_mod
            state["model"] = model.state_dict()
        # other top-level modules with weights (a teacher, an EMA copy), largest first
        for k, extra in enumerate(roots[1:4], start=1):
            if any(True for _ in extra.parameters()):
                state[f"model{k}"] = extra.state_dict()
        opts = live_objects(torch.optim.Optimizer)
        for k, o in enumerate(opts):
            state["optimizer" if len(opts) == 1 else f"optimizer{k}"] = o.state_dict()
        if opts and roots:
            # by the parameter's name: an optimizer rebuilt over the parameters in another
            # order keeps its state_dict's bytes and attaches them to other tensors
            state["optimizer_by_param"] = by_param(roots, opts)
        scheds = live_objects(torch.optim.lr_scheduler.LRScheduler)
        for k, o in enumerate(scheds):
            state["scheduler" if len(scheds) == 1 else f"scheduler{k}"] = o.state_dict()
        if roots:
            # what no state_dict holds: modes, shared parameters, the optimizer's membership,
            # and the gradients summed so far (a checkpoint inside a window loses them)
            state["model_structure"] = structure(roots[0], opts)
            state["model_grads"] = grads(roots[0])
            state["model_unsaved"] = unsaved_buffers(roots[0])
        m = build_manifest(state, label=label)
    m.data_cursor = cursor_states(data_cursors()) or None
    m.module_globals = module_globals()
    from .settings import read_settings

    m.settings = read_settings()
    for name, digest in (rng_start or {}).items():
        if m.rng.get(name) == digest:
            # never seeded nor drawn from: its state is the interpreter's entropy, which
            # differs between any two processes and feeds nothing
            m.rng[name] = UNTOUCHED
    for i, t in enumerate(batch or ()):
        if isinstance(t, torch.Tensor):
            m.tensors[f"batch.args[{i}]"] = tensor_entry(t)
    return m


class _Watch:
    """Records writes to the attributes of data cursors, through their class's
    ``__setattr__``, and when each cursor's ``load_state_dict`` last returned: in a resumed
    process what moves a cursor after its restore counts, however early in the script."""

    def __init__(self) -> None:
        self.writes: deque[tuple[int, int, Any]] = deque(maxlen=10_000)  # (seq, id, write)
        self.seq = 0
        self.restored: dict[int, int] = {}  # id(cursor) -> seq when its restore returned
        self.classes: set[type] = set()
        self.on = True

    def watch_class(self, cls: type) -> None:
        if cls in self.classes:
            return
        self.classes.add(cls)
        watch, orig_set, orig_load = self, cls.__setattr__, cls.load_state_dict

        def __setattr__(obj, attr, value):
            orig_set(obj, attr, value)
            if watch.on:
                watch.seq += 1
                watch.writes.append((watch.seq, id(obj), _written(attr, value, sys._getframe(1))))

        @functools.wraps(orig_load)
        def load_state_dict(obj, *args, **kwargs):
            out = orig_load(obj, *args, **kwargs)
            watch.seq += 1
            watch.restored[id(obj)] = watch.seq
            return out

        cls.__setattr__ = __setattr__
        cls.load_state_dict = load_state_dict

    def since(self, start: int, names: dict[int, str], resumed: bool) -> list[Any]:
        """The writes to the named cursors after ``start`` (after their restore, in a
        resumed process), each with its cursor's name."""
        out = []
        for seq, oid, w in self.writes:
            name = names.get(oid)
            begin = self.restored.get(oid, start) if resumed else start
            if name is not None and seq > begin:
                out.append(w.model_copy(update={"obj": name}))
        return out


PY_DRAWS = (
    *("random", "randint", "randrange", "choice", "choices", "shuffle", "sample"),
    *("uniform", "gauss", "normalvariate", "getrandbits"),
)
NP_DRAWS = (
    *("rand", "randn", "randint", "random", "random_sample", "ranf", "sample", "choice"),
    *("permutation", "shuffle", "normal", "uniform", "binomial", "poisson", "exponential"),
    *("beta", "gamma", "standard_normal", "bytes"),
)


def _job_frame() -> str | None:
    """file:line (function) of the innermost frame outside torch, numpy, random and this
    project: the job's line that made the call."""
    skip = (os.sep + os.path.join("torch", ""), os.path.join("numpy", ""), "triage_agent")
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not any(s in name for s in skip) and not name.endswith(os.sep + "random.py"):
            return f"{name}:{f.f_lineno} ({f.f_code.co_qualname})"
        f = f.f_back
    return None


def _written(attr: str, value: Any, frame: Any) -> Any:
    """One write, with the function it entered the cursor's module through and its caller."""
    from .manifest import AttrWrite

    mod = frame.f_globals.get("__name__")
    entry, up = frame, frame.f_back
    while up is not None and up.f_globals.get("__name__") == mod:
        entry, up = up, up.f_back
    shown = repr(value)[:200] if isinstance(value, PLAIN) else type(value).__name__
    return AttrWrite(
        obj="",
        attr=attr,
        value=shown,
        target=f"{mod}:{entry.f_code.co_qualname}",
        site=f"{frame.f_code.co_filename}:{frame.f_lineno}",
        caller=f"{up.f_code.co_filename}:{up.f_lineno}" if up else None,
        caller_function=up.f_code.co_qualname if up else None,
    )


def _is_cursor_class(obj: Any, module: str) -> bool:
    import torch

    return (
        isinstance(obj, type)
        and obj.__dict__.get("__module__") == module
        and callable(getattr(obj, "state_dict", None))
        and callable(getattr(obj, "load_state_dict", None))
        and not issubclass(obj, torch.nn.Module | torch.optim.Optimizer)
    )


class _OwnModules(importlib.abc.MetaPathFinder):
    """Watches the cursor classes of the job's own modules (files under its working
    directory, outside any site-packages) as each module finishes executing."""

    def __init__(self, root: str, watch: _Watch) -> None:
        self.root, self.watch, self.busy = root.rstrip("/") + "/", watch, False

    def find_spec(self, name, path, target=None):  # noqa: ANN001 - the finder protocol
        if self.busy:
            return None
        self.busy = True
        try:
            # only the finders after this one: those before it (the patch finders) call it
            later = sys.meta_path[sys.meta_path.index(self) + 1 :] if self in sys.meta_path else []
            others = [f for f in later if hasattr(f, "find_spec")]
            spec = next((s for f in others if (s := f.find_spec(name, path, target))), None)
        finally:
            self.busy = False
        origin = getattr(spec, "origin", None) or ""
        loader = getattr(spec, "loader", None)
        if not origin.startswith(self.root) or "/site-packages/" in origin:
            return spec
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec
        run_module, watch = loader.exec_module, self.watch

        def exec_module(module):  # noqa: ANN001, ANN202
            run_module(module)
            for obj in list(vars(module).values()):
                if _is_cursor_class(obj, module.__name__):
                    watch.watch_class(obj)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _Capture:
    def __init__(self, cfg: BoundaryConfig) -> None:
        self.cfg = cfg
        self.resumed = False
        self.first_forward = False
        self.after: bool = False  # after-K written in this process, step K+1 not yet
        self.done = False
        self.watch = _Watch()
        self.hook: Any = None
        self.opened = 0  # the write sequence number at after-K
        self.rng_start: dict[str, str] = {}
        self.seeds: list[Any] = []
        self.built = 0  # parameters registered on modules so far (a seeding's place in set-up)
        self.seeding = False
        self.draws: dict[str, int] = {}
        self.last_step: int | None = None
        self.saved = False  # an end record was written as a torch.save returned

    def seeded(self, fn: str, value: Any) -> None:
        """Record one seeding, with the job's frame that made it (never fails the job)."""
        try:
            from .job_frames import job_stack
            from .manifest import SeedCall, _sha

            said = repr(value) if isinstance(value, int | float | str | None) else _sha(value)
            skip = (os.sep + os.path.join("torch", ""), os.path.join("numpy", ""), "triage_agent")
            self.seeds.append(
                SeedCall(
                    fn=fn,
                    value=said[:80],
                    caller=_job_frame(),
                    path=job_stack(skip)[:6],
                    built=self.built,
                )
            )
        except Exception:  # noqa: BLE001 - as in write
            pass

    def watch_seeds(self, owner: Any, names: tuple[str, ...], prefix: str) -> None:
        for name in names:
            fn = getattr(owner, name, None)
            if fn is None or getattr(fn, "_triage_seed", False):
                continue

            def make(fn: Any = fn, label: str = f"{prefix}.{name}") -> Any:
                @functools.wraps(fn)
                def seeding(*args: Any, **kwargs: Any) -> Any:
                    if self.seeding:  # torch.manual_seed seeds CUDA too: one call, one record
                        return fn(*args, **kwargs)
                    self.seeded(label, args[0] if args else next(iter(kwargs.values()), None))
                    self.seeding = True
                    try:
                        return fn(*args, **kwargs)
                    finally:
                        self.seeding = False

                seeding._triage_seed = True  # type: ignore[attr-defined]
                return seeding

            setattr(owner, name, make())

    def watch_draws(self, owner: Any, names: tuple[str, ...], prefix: str) -> None:
        """Count the draws from a module's global generator, by the job's line that made them
        (torch's draws are ops: a trace sees them; numpy's and python's are not)."""
        for name in names:
            fn = getattr(owner, name, None)
            if fn is None or getattr(fn, "_triage_draw", False):
                continue

            def make(fn: Any = fn, label: str = f"{prefix}.{name}") -> Any:
                @functools.wraps(fn)
                def drawing(*args: Any, **kwargs: Any) -> Any:
                    if not self.seeding:
                        self.seeding = True  # a draw made by another draw is not the job's
                        try:
                            key = f"{label} at {_job_frame()}"
                            if len(self.draws) < 256 or key in self.draws:
                                self.draws[key] = self.draws.get(key, 0) + 1
                        except Exception:  # noqa: BLE001 - as in write
                            pass
                        finally:
                            self.seeding = False
                    return fn(*args, **kwargs)

                drawing._triage_draw = True  # type: ignore[attr-defined]
                return drawing

            setattr(owner, name, make())

    def install(self) -> None:
        """At start-up. Nothing here imports torch: the hook is set once the job imports it,
        and a process that never does (DeepSpeed's py-cpuinfo probes) pays for reading the
        config alone. Each stream's start is taken when its module is first imported, before
        the job can seed it."""
        import random

        from .import_hooks import on_import
        from .manifest import _sha

        self.rng_start["python"] = _sha(random.getstate())
        self.watch_seeds(random, ("seed", "setstate"), "random")
        self.watch_draws(random, PY_DRAWS, "random")
        pending: dict[str, list[Callable[[Any], None]]] = {}
        for name, then in (
            ("numpy.random", self.numpy_imported),
            ("torch", self.torch_imported),
            ("triage_agent.metrics", self.patch_metrics),
        ):
            if name in sys.modules:
                then(sys.modules[name])
            else:
                pending[name] = [then]
        # just before the path finder: any finder that patches a module on import stays
        # ahead of this one and still sees every module first
        at = next(
            (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
            len(sys.meta_path),
        )
        sys.meta_path.insert(at, _OwnModules(os.getcwd(), self.watch))
        if pending:
            on_import(pending)

    def numpy_imported(self, nprandom: Any) -> None:
        from .manifest import _sha

        self.rng_start["numpy"] = _sha(nprandom.get_state())
        self.watch_seeds(nprandom, ("seed", "set_state"), "numpy.random")
        self.watch_draws(nprandom, NP_DRAWS, "numpy.random")

    def torch_imported(self, torch: Any) -> None:
        from .manifest import _sha

        self.rng_start["torch_cpu"] = _sha(torch.get_rng_state())
        self.watch_saves(torch)
        self.watch_seeds(torch, ("manual_seed", "seed", "set_rng_state"), "torch")
        self.watch_seeds(torch.random, ("manual_seed", "seed", "set_rng_state"), "torch.random")
        self.watch_seeds(
            torch.cuda, ("manual_seed", "manual_seed_all", "set_rng_state"), "torch.cuda"
        )
        from .generator_hooks import watch_generators

        def generator_seeded(fn: str, value: Any) -> Any:
            self.seeded(fn, value)
            return value

        # the job's own generators (a masker's, a sampler's): seeded by a method, not a function
        watch_generators(torch, generator_seeded)
        register = torch.nn.Module.register_parameter

        def register_parameter(module: Any, name: str, param: Any) -> None:
            if param is not None:
                self.built += 1
            register(module, name, param)

        torch.nn.Module.register_parameter = register_parameter
        self.hook = torch.nn.modules.module.register_module_forward_pre_hook(self.on_forward)

    def write(self, point: str, batch: tuple | None = None, writes: list | None = None) -> None:
        try:
            self._write(point, batch, writes)
        except Exception as exc:  # noqa: BLE001 - the capture must never change the job's course
            sys.stderr.write(f"triage state capture: {point} not recorded: {exc!r}"[:300] + "\n")

    def _write(self, point: str, batch: tuple | None, writes: list | None) -> None:
        from .manifest import BoundaryRecord

        rank = process_rank()
        rec = BoundaryRecord(
            point=point,
            rank=rank,
            pid=os.getpid(),
            manifest=state_now(batch, label=point, rng_start=self.rng_start),
            writes=writes or [],
            seeds=self.seeds,
            draws=self.draws,
        )
        self.seeds, self.draws = [], {}
        write_report(self.cfg.out_dir, f"state-{point}-rank{rank}-pid{os.getpid()}.json", rec)

    def reached_after(self) -> None:
        if self.done or self.after:
            return
        self.write(f"after-{self.cfg.after_step}")
        self.after = True
        self.opened = self.watch.seq
        try:
            for o in data_cursors().values():
                if own_class(type(o)):
                    self.watch.watch_class(type(o))
        except Exception as exc:  # noqa: BLE001 - as in write
            sys.stderr.write(f"triage state capture: cursors not watched: {exc!r}"[:300] + "\n")

    def on_forward(self, module, args):
        import torch

        # First, before any state is read: inlined into a compiled module's frame this is
        # the whole hook, so the graph holds nothing of it and guards on none of its state
        # (the outermost call of a compiled module runs its hooks eagerly, and records).
        if torch.compiler.is_compiling():
            return None
        if self.done or not torch.is_grad_enabled():
            return None
        if not self.first_forward:
            self.first_forward = True
            if self.cfg.init and not self.resumed:
                self.write("init", args)
                if self.cfg.after_step is None:
                    self.finish()
                    return None
        if self.after:
            self.watch.on = False
            names = {id(o): name for name, o in data_cursors().items()}
            writes = self.watch.since(self.opened, names, self.resumed)
            self.write(f"step-{self.cfg.after_step + 1}", args, writes)
            self.finish()
        return None

    def watch_saves(self, torch: Any) -> None:
        """The saving process's state as each ``torch.save`` returns, named by the last step
        it logged: the last one is what its checkpoint holds. A process that logged step K
        and saved inside step K+1 (a checkpoint inside an accumulation window) saved
        elsewhere than after-K."""
        orig = torch.save
        cap = self

        @functools.wraps(orig)
        def save(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            if not cap.resumed and cap.after and cap.last_step == cap.cfg.after_step:
                cap.saved = True
                cap.write(f"end-{cap.last_step}")
            return out

        torch.save = save

    def at_exit(self) -> None:
        """A process that saved nothing through ``torch.save``: its state at its end, while
        its training objects are still alive (a job that returned from its main function
        has let them go, and a record without them would say they vanished)."""
        if self.resumed or self.saved or not self.after:
            return
        if self.last_step != self.cfg.after_step:
            return  # it went on past K: its end is no checkpoint a resume from K reads
        if root_modules():
            self.write(f"end-{self.last_step}")

    def finish(self) -> None:
        # The hook stays registered: a compiled module guards on the global hooks, and
        # removing one mid-run would recompile it (and may reach the recompile limit, where
        # it runs eager: other bits) in a run that goes on.
        self.done = True
        self.watch.on = False
        if self.cfg.stop and (self.resumed or not self.cfg.stop_only_resumed):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def patch_metrics(self, module: Any) -> None:
        cls = getattr(module, "MetricLog", None)
        if cls is None or getattr(cls.log, "_triage_state", False):
            return
        cap, k = self, self.cfg.after_step
        orig_init, orig_log = cls.__init__, cls.log
        sig = inspect.signature(orig_init)

        @functools.wraps(orig_init)
        def __init__(log, *args, **kwargs):
            orig_init(log, *args, **kwargs)
            resumed = sig.bind(log, *args, **kwargs).arguments.get("resumed_from")
            if resumed is not None:
                cap.resumed = True
                if k is not None and int(resumed) == k:
                    cap.reached_after()

        @functools.wraps(orig_log)
        def log(metric_log, step, *args, **kwargs):
            result = orig_log(metric_log, step, *args, **kwargs)
            if isinstance(step, int):
                cap.last_step = step
            if k is not None and isinstance(step, int) and step == k:
                cap.reached_after()
            return result

        log._triage_state = True  # type: ignore[attr-defined]
        cls.__init__, cls.log = __init__, log


INJECT_DIR = Path(__file__).resolve().parent / "boundary_inject"


def launch_env(cfg_path: Path, pythonpath: str | None) -> dict[str, str]:
    """The variables that make a run's processes capture the state ``cfg_path`` asks for.

    The bootstrap that every relaunch injects runs the ``sitecustomize`` standing next on
    the path, which is ours: it installs the capture and then runs the job's own, if any."""
    pp = str(INJECT_DIR) + (os.pathsep + pythonpath if pythonpath else "")
    return {STATE_ENV: str(cfg_path), "PYTHONPATH": pp}


def install() -> None:
    """Called at start-up in every process when ``TRIAGE_STATE_CAPTURE`` is set."""
    cfg = startup_config(STATE_ENV, BoundaryConfig, "state capture")
    if cfg is not None:
        import atexit

        cap = _Capture(cfg)
        cap.install()
        atexit.register(cap.at_exit)


def chain_next() -> None:
    """Run the ``sitecustomize`` ours shadows, as Python would have."""
    chain({str(INJECT_DIR), str(Path(__file__).resolve().parent / "fingerprint" / "inject")})
