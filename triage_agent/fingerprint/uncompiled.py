"""torch.compile never compiles the tracer's own code.

Once a compiled function is called, Dynamo's frame hook sees every Python frame that runs
beneath it and compiles each one its skip rules do not name, the tracer's included: the
dispatch mode's handler runs inside the model's ops with the mode popped (so Dynamo does not
stand aside for a mode), and module hooks run in the eager gaps around graph breaks. A
digest compiled so is a wrong digest: Inductor folds the order digest's 64-bit lane
combination into a kernel with other integer semantics (measured on one H200: a float cast
before an xor, then a non-representable constant), and the tracer's state in the guards
recompiles its functions to the recompile limit.

Every code object of the tracer's modules is marked skipped (Dynamo's per-code frame
strategy): Dynamo runs such a frame as it is. A module's functions and its classes' methods
are skipped with every frame they call (pydantic writing a record, Triton launching the
digest kernel: nothing under them is compiled either). Functions nested in them are the
wrappers the tracer patches around the job's own code (its step function, DeepSpeed's
engine, MetricLog, collectives): those are skipped alone, and Dynamo judges the frames
they call by its own rules, as it would without the tracer. The marks are on frames, not
on calls Dynamo inlines while it traces a compiled frame: a module hook inlined into the
module's ``__call__`` still inlines, stands aside through ``torch.compiler.is_compiling()``
and leaves the graph as it is without the tracer.

The marks are set once ``torch._dynamo`` is imported (importing it takes seconds, and a
process that never imports it compiles nothing), and again at each step's start: for
modules loaded since, and because ``torch._dynamo.reset()`` clears them.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

# the tracer's own modules: the package's fingerprint code and the glue the tracer patches in
_PREFIXES = ("triage_agent.fingerprint", "triage_agent.policies")

# module name -> its (code object, nested) pairs, found once: the marks themselves are set
# again each time, since torch._dynamo.reset() drops them with a code object's Dynamo state
_codes_of: dict[str, list[tuple[types.CodeType, bool]]] = {}
_modules_seen: tuple[int, str | None] = (0, None)


def keep_dynamo_out(_module: object = None) -> int:
    """Mark every code object of the tracer's loaded modules skipped; returns how many were
    marked. A no-op until ``torch._dynamo`` is imported."""
    if "torch._dynamo" not in sys.modules:
        return 0
    mark = _marker()
    if mark is None:  # pragma: no cover - a torch without per-code frame strategies
        return 0
    # the scan of sys.modules is the costly part: only when a module was loaded since (the
    # count and the newest name, which a load always changes)
    global _modules_seen
    key = (len(sys.modules), next(reversed(sys.modules), None))
    if key != _modules_seen:
        _modules_seen = key
        for name, mod in list(sys.modules.items()):
            if name not in _codes_of and mod is not None and name.startswith(_PREFIXES):
                _codes_of[name] = list(_codes(mod))
    n = 0
    for codes in _codes_of.values():
        for code, nested in codes:
            mark(code, nested)
        n += len(codes)
    return n


def _marker():
    """``mark(code, nested)``: skip the frame, with its callees unless ``nested``."""
    try:
        from torch._C._dynamo.eval_frame import (
            _FrameAction,
            _FrameExecStrategy,
            set_code_exec_strategy,
        )
    except ImportError:
        try:
            from torch._dynamo.eval_frame import skip_code
        except ImportError:
            return None
        return lambda code, nested: skip_code(code)
    alone = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.DEFAULT)
    deep = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    return lambda code, nested: set_code_exec_strategy(code, alone if nested else deep)


def _codes(mod: types.ModuleType) -> Iterator[tuple[types.CodeType, bool]]:
    """(code object, nested) for the code defined in ``mod``: its functions', its classes'
    methods' and every function nested in them (closures share their code object)."""
    name = mod.__name__
    stack = list(vars(mod).values())
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, type):
            if v.__module__ == name:
                stack.extend(vars(v).values())
        elif isinstance(v, (staticmethod, classmethod)):
            stack.append(v.__func__)
        elif isinstance(v, property):
            stack.extend(f for f in (v.fget, v.fset, v.fdel) if f is not None)
        elif isinstance(v, types.FunctionType) and v.__module__ == name:
            codes = [(v.__code__, False)]
            while codes:
                co, nested = codes.pop()
                yield co, nested
                codes.extend((c, True) for c in co.co_consts if isinstance(c, types.CodeType))
