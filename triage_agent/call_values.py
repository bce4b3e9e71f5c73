"""The small values the job's own functions are handed and return, line by line.

A value that steers training without being a tensor the tracer sees (a learning-rate
factor, a loss scale, a step count, a seed) is computed by plain Python in the job's own
code. Injected into a rerun (the patch file's ``values``), this records, for every call of
a function defined in the job's own files (:class:`~.job_frames.JobFiles`):

- its inputs: each argument, each variable its closure holds and each module global its
  code names, where the value is small (a number, a string, a dtype, a tensor of at most
  16 elements, a short tuple of those), and of an object among them its small attributes;
- what it returned, when that is small;
- each line's small locals that changed when the line ran, and of a method the small
  attributes of its object (``self.NAME``) that line wrote (the first 400 lines of a call).

Two runs' reports, paired call by call, say which function first returns another number
from the same numbers (:mod:`.workflow.value_origin`). Only reads: nothing here changes a
value the job computes with. The report is written beside the job's metrics at exit.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

from .job_frames import JobFiles
from .metrics_reports import BesideMetrics

REPORT_PREFIX = ".triage-values-"
MAX_CALLS_PER_FUNCTION = 500
MAX_LINES_PER_CALL = 400
MAX_CALLS = 20000
MAX_ELEMENTS = 16
MAX_ATTRS = 48


def small(v: Any, depth: int = 0) -> str | None:
    """The text of a small value two runs can compare exactly, None when it is not small.
    Numbers carry their type (``f:`` a float in hex, ``i:`` an int), tensors their dtype
    and shape, so a value computed in another precision differs even when it rounds alike."""
    if v is None or isinstance(v, bool):
        return f"b:{v!r}"
    if isinstance(v, int):
        return f"i:{v}"
    if isinstance(v, float):
        return f"f:{v.hex()}"
    if isinstance(v, str):
        return f"s:{v[:80]!r}"
    name = type(v).__name__
    module = type(v).__module__
    if module == "torch" and name in ("dtype", "device"):
        return f"s:{v!s}"
    if name in ("Tensor", "Parameter") and module.startswith("torch"):
        try:
            if v.numel() > MAX_ELEMENTS or v.is_sparse:
                return None
            vals = v.detach().cpu().reshape(-1).tolist()
        except Exception:  # noqa: BLE001 - a tensor that cannot be read is not small
            return None
        text = ",".join(x.hex() if isinstance(x, float) else str(x) for x in vals)
        return f"t:{str(v.dtype).removeprefix('torch.')}{tuple(v.shape)}:{text}"
    if module == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        return small(v.item(), depth)
    if isinstance(v, tuple | list) and depth == 0 and len(v) <= MAX_ELEMENTS:
        parts = [small(x, 1) for x in v]
        return None if any(p is None for p in parts) else f"l:({';'.join(parts)})"  # type: ignore[arg-type]
    return None


def numeric(text: str) -> bool:
    """Whether a recorded value is a number (an int, a float, a tensor)."""
    return text[:2] in ("i:", "f:", "t:")


def _attrs(obj: Any, prefix: str, out: dict[str, str]) -> None:
    """The small attributes of an object the job handed a function (a config, a namespace,
    a scheduler), one level deep."""
    d = getattr(obj, "__dict__", None)
    if not isinstance(d, dict) or len(d) > 4 * MAX_ATTRS:
        return
    n = 0
    for k, v in d.items():
        if k.startswith("__"):
            continue
        t = small(v)
        if t is not None:
            out[f"{prefix}.{k}"] = t
            n += 1
            if n >= MAX_ATTRS:
                return


def _is_code(v: Any) -> bool:
    return callable(v) or type(v).__name__ == "module"


class _Recorder:
    def __init__(self) -> None:
        self.job = JobFiles()
        self.calls: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.seq = 0
        self.keys: dict[Any, str | None] = {}
        self.report = BesideMetrics(
            f"{REPORT_PREFIX}{os.environ.get('RANK', '0')}-{os.getpid()}.json"
        )

    def key(self, code: Any) -> str | None:
        k = self.keys.get(code, False)
        if k is False:
            k = self.keys[code] = (
                f"{code.co_filename}:{code.co_firstlineno}:{getattr(code, 'co_qualname', code.co_name)}"
                if self.job(code.co_filename) and code.co_name != "<module>"
                else None
            )
        return k  # type: ignore[return-value]

    def inputs(self, frame: Any) -> tuple[dict[str, str], bool]:
        code = frame.f_code
        loc = frame.f_locals
        nargs = code.co_argcount + code.co_kwonlyargcount
        nargs += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        out: dict[str, str] = {}
        complete = True
        for name in (*code.co_varnames[:nargs], *code.co_freevars):
            if name not in loc:
                continue
            v = loc[name]
            t = small(v)
            if t is not None:
                out[name] = t
            elif not _is_code(v):
                before = len(out)
                _attrs(v, name, out)
                if len(out) == before and name in code.co_varnames[:nargs]:
                    complete = False  # an argument none of whose parts is small
        glob = frame.f_globals
        for name in code.co_names:
            if name in glob and name not in out:
                v = glob[name]
                if _is_code(v):
                    continue
                t = small(v)
                if t is not None:
                    out[f"global {name}"] = t
                else:
                    _attrs(v, f"global {name}", out)
        return out, complete

    def trace(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "call" or len(self.calls) >= MAX_CALLS:
            return None
        key = self.key(frame.f_code)
        if key is None:
            return None
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        if n >= MAX_CALLS_PER_FUNCTION:
            return None
        try:
            ins, complete = self.inputs(frame)
        except Exception:  # noqa: BLE001 - the recorder must never change the job's course
            return None
        code = frame.f_code
        owner = (
            frame.f_locals.get("self")
            if code.co_argcount and code.co_varnames[0] == "self"
            else None
        )
        call: dict[str, Any] = {"fn": key, "i": n, "in": ins, "complete": complete, "lines": []}
        if owner is not None:
            call["cls"] = type(owner).__qualname__
        self.calls.append(call)
        state = {"last": frame.f_lineno, "seen": self._locals(frame, owner)}

        def local(fr: Any, ev: str, a: Any) -> Any:
            try:
                now = self._locals(fr, owner)
                changed = {k: v for k, v in now.items() if state["seen"].get(k) != v}
                if changed and len(call["lines"]) < MAX_LINES_PER_CALL:
                    self.seq += 1
                    call["lines"].append([state["last"], changed, self.seq])
                state["seen"] = now
                state["last"] = fr.f_lineno
                if ev == "return":
                    self.seq += 1
                    call["seq"] = self.seq
                    call["ret"] = small(a)
            except Exception:  # noqa: BLE001 - the recorder must never change the job's course
                return None
            return local

        return local

    @staticmethod
    def _locals(frame: Any, owner: Any = None) -> dict[str, str]:
        """The frame's small locals, and the small attributes of the method's object
        (``self.NAME``): a line that writes one shows as that attribute changed."""
        out: dict[str, str] = {}
        for k, v in frame.f_locals.items():
            t = small(v)
            if t is not None:
                out[k] = t
        if owner is not None:
            _attrs(owner, "self", out)
        return out

    def write(self) -> None:
        self.report.report = {"pid": os.getpid(), "calls": self.calls}
        self.report.write()


def install() -> None:
    """Record from now on, in this thread, and write the report at exit."""
    rec = _Recorder()
    sys.settrace(rec.trace)
    atexit.register(rec.write)


__all__ = ["REPORT_PREFIX", "install", "numeric", "small"]
