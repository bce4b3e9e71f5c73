"""Writes to chosen attributes of chosen classes, recorded inside every process of a rerun.

When ``TRIAGE_WRITE_WATCH`` names a :class:`WatchConfig`, the injected bootstrap (the
``sitecustomize`` chain of :mod:`triage_agent.boundary_inject`) wraps each target class's
``__setattr__`` as soon as its module has executed. Every write to a watched attribute is
recorded with the value's shape (a dict's keys, a tensor's dtype and shape, a scalar
exactly) and the frames it was made through, innermost first. When the process dies of an
exception, the object whose state the failing frames were reading (the innermost frame whose
``self`` is of a watched class) is recorded too, so the write that object last received can
be told from the other writes: it is the value the failure read.

Only reads: nothing here changes a value the job computes with. Each process writes one
JSON report, at exit (after the crash, when there is one).
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

from pydantic import BaseModel, Field

from ..boundary_capture import process_rank, startup_config, write_report

WATCH_ENV = "TRIAGE_WRITE_WATCH"
MAX_FRAMES = 16
MAX_DISTINCT = 2000
# an attribute named so is a key of each of an optimizer's param groups (a plain dict each),
# watched by handing the optimizer dicts that record their writes
GROUP_KEY = "param_groups[]."


class WatchTarget(BaseModel):
    module: str = Field(description="the module that defines the class, pkg.mod")
    qualname: str
    attrs: list[str] = Field(min_length=1)

    @property
    def name(self) -> str:
        return f"{self.module}:{self.qualname}"


class WatchConfig(BaseModel):
    targets: list[WatchTarget] = Field(min_length=1)
    out_dir: str


class Frame(BaseModel):
    file: str
    line: int
    function: str = Field(description="the code's qualified name")
    module: str = ""

    def site(self) -> str:
        return f"{self.file}:{self.line}"


class WriteRecord(BaseModel):
    cls: str = Field(description="pkg.mod:Qual of the watched class")
    attr: str
    value: str = Field(description="the value's shape: a dict's keys, a tensor's dtype/shape")
    stack: list[Frame] = Field(description="innermost first: the assignment, then its callers")
    count: int = Field(default=1, description="how many writes were made through this path")


class CrashRead(BaseModel):
    cls: str
    error: str
    frame: Frame
    last: dict[str, WriteRecord] = Field(
        default_factory=dict, description="attr -> the last write this object received"
    )


class WatchReport(BaseModel):
    pid: int
    rank: int
    writes: list[WriteRecord] = Field(
        default_factory=list, description="every distinct (path, value) written, counted"
    )
    crash: CrashRead | None = None


def shape_of(v: Any) -> str:
    """What a value is, in terms two runs can compare without its numbers."""
    if v is None or isinstance(v, bool | int | float | str):
        return repr(v)[:80]
    if isinstance(v, dict):
        keys = sorted(str(k) for k in v)
        return f"dict with {len(keys)} keys [{', '.join(keys[:8])}]"
    if isinstance(v, list | tuple | set):
        return f"{type(v).__name__} of {len(v)}"
    if type(v).__name__ in ("Tensor", "Parameter") and hasattr(v, "dtype"):
        return f"tensor {v.dtype} {tuple(v.shape)}"
    return type(v).__name__


def _stack(frame: Any) -> list[Frame]:
    out = []
    while frame is not None and len(out) < MAX_FRAMES:
        code = frame.f_code
        out.append(
            Frame(
                file=code.co_filename,
                line=frame.f_lineno,
                function=code.co_qualname,
                module=str(frame.f_globals.get("__name__", "")),
            )
        )
        frame = frame.f_back
    return out


class _Recorder:
    def __init__(self, cfg: WatchConfig) -> None:
        self.cfg = cfg
        self.distinct: dict[tuple, WriteRecord] = {}
        self.last: dict[tuple[int, str], WriteRecord] = {}
        self.classes: dict[type, WatchTarget] = {}
        self.crash: CrashRead | None = None
        self.written = False

    def record(self, cls: type, obj: Any, attr: str, value: Any, frame: Any) -> None:
        target = self.classes[cls]
        rec = WriteRecord(cls=target.name, attr=attr, value=shape_of(value), stack=_stack(frame))
        key = (rec.attr, rec.value, tuple((f.file, f.line) for f in rec.stack))
        seen = self.distinct.get(key)
        if seen is not None:
            seen.count += 1
        elif len(self.distinct) < MAX_DISTINCT:
            self.distinct[key] = rec
        self.last[(id(obj), attr)] = rec

    def watch(self, cls: type, target: WatchTarget) -> None:
        if cls in self.classes:
            return
        self.classes[cls] = target
        keys = frozenset(a[len(GROUP_KEY) :] for a in target.attrs if a.startswith(GROUP_KEY))
        if keys:
            self.watch_groups(cls, keys)
        rec, attrs, orig = (
            self,
            frozenset(target.attrs) - {GROUP_KEY + k for k in keys},
            cls.__setattr__,
        )
        if not attrs:
            return

        def __setattr__(obj, attr, value):
            orig(obj, attr, value)
            if attr in attrs:
                try:
                    rec.record(cls, obj, attr, value, sys._getframe(1))
                except Exception:  # noqa: BLE001 - the watch must never change the job's course
                    pass

        cls.__setattr__ = __setattr__

    def watch_groups(self, cls: type, keys: frozenset[str]) -> None:
        """An optimizer's param groups become dicts that record writes of ``keys`` (a
        learning rate a callback or a scheduler sets), re-made after each group is added
        and after a state load (which rebuilds them). Reads are untouched."""
        import weakref

        rec = self

        class Group(dict):
            def __setitem__(g, key: Any, value: Any) -> None:  # noqa: N805
                dict.__setitem__(g, key, value)
                owner = g.__dict__.get("_triage_owner")
                if key in keys and owner is not None and owner() is not None:
                    try:
                        attr = f"param_groups[{g.__dict__['_triage_index']}].{key}"
                        rec.record(cls, owner(), attr, value, sys._getframe(1))
                    except Exception:  # noqa: BLE001 - the watch must never change the job
                        pass

        def wrap(opt: Any) -> None:
            groups = getattr(opt, "param_groups", None)
            if not isinstance(groups, list):
                return
            for i, g in enumerate(groups):
                if type(g) is dict:
                    w = Group(g)
                    w.__dict__["_triage_owner"] = weakref.ref(opt)
                    w.__dict__["_triage_index"] = i
                    groups[i] = w

        add, load = cls.add_param_group, cls.load_state_dict

        def add_param_group(opt: Any, *args: Any, **kwargs: Any) -> Any:
            out = add(opt, *args, **kwargs)
            wrap(opt)
            return out

        def load_state_dict(opt: Any, *args: Any, **kwargs: Any) -> Any:
            out = load(opt, *args, **kwargs)
            wrap(opt)
            return out

        cls.add_param_group, cls.load_state_dict = add_param_group, load_state_dict

    def on_module(self, module: Any) -> None:
        for t in self.cfg.targets:
            if t.module != module.__name__:
                continue
            owner: Any = module
            for part in t.qualname.split("."):
                owner = getattr(owner, part, None)
            if isinstance(owner, type):
                self.watch(owner, t)

    def on_crash(self, exc_type: Any, exc: Any, tb: Any) -> None:
        frames = []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for f in reversed(frames):  # innermost first
            code = f.f_code
            first = code.co_varnames[0] if code.co_argcount else None
            obj = f.f_locals.get(first) if first else None
            cls = next((c for c in self.classes if isinstance(obj, c)), None)
            if cls is None:
                continue
            target = self.classes[cls]
            self.crash = CrashRead(
                cls=target.name,
                error=f"{exc_type.__name__}: {exc}"[:200],
                frame=_stack(f)[0],
                last={a: w for a in target.attrs if (w := self.last.get((id(obj), a)))},
            )
            return

    def report(self) -> None:
        rank = process_rank()
        rep = WatchReport(
            pid=os.getpid(), rank=rank, writes=list(self.distinct.values()), crash=self.crash
        )
        write_report(self.cfg.out_dir, f"writes-rank{rank}-pid{os.getpid()}.json", rep)


def install() -> None:
    """Called at start-up in every process when ``TRIAGE_WRITE_WATCH`` is set."""
    cfg = startup_config(WATCH_ENV, WatchConfig, "write watch")
    if cfg is None:
        return
    from ..import_hooks import on_import

    rec = _Recorder(cfg)
    pending: dict[str, list[Any]] = {}
    for t in cfg.targets:
        if t.module in sys.modules:
            rec.on_module(sys.modules[t.module])
        else:
            pending.setdefault(t.module, []).append(rec.on_module)
    if pending:
        on_import(pending)
    prior = sys.excepthook

    def excepthook(exc_type, exc, tb):  # noqa: ANN001, ANN202
        try:
            rec.on_crash(exc_type, exc, tb)
            rec.report()
        except Exception:  # noqa: BLE001 - the job's own failure is what must be printed
            pass
        prior(exc_type, exc, tb)

    sys.excepthook = excepthook
    atexit.register(lambda: rec.crash is None and rec.report())
