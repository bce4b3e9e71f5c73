"""The tracer stands aside while torch.compile compiles.

Compiling runs the model's ops on fake tensors (Dynamo's and AOTAutograd's tracing, a
backward compiled on its first call) and, for some backends, real kernels to time them. None
of that is the job's computation: an op observer that saw it would record events the
untraced run never executes, and a digest of a fake tensor reads memory that is not there
(the C++ observer dies of it). Dynamo announces each compilation to the callbacks of
``torch._dynamo.callback_handler``; the tracer is suspended from the first start to the
matching end, as it is while it reads a job's metrics, and the compiled code it then runs is
traced as it executes (the ops it dispatches; a generated kernel is one opaque call).

``torch._dynamo.reset()`` clears those callbacks, so they are registered again at each
step's start; a process that never imports ``torch._dynamo`` compiles nothing and gets none.
"""

from __future__ import annotations

import sys
from typing import Any


class _StandAside:
    """The start and end callbacks of one tracer (a pair, so that each end undoes one start)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.open = False

    def start(self, _args: Any) -> None:
        if not self.open:
            self.open = True
            self.tracer._suspended += 1

    def end(self, _args: Any) -> None:
        if self.open:
            self.open = False
            self.tracer._suspended -= 1


def _handler() -> Any:
    if "torch._dynamo" not in sys.modules:
        return None
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:  # pragma: no cover - a torch without compile callbacks
        return None
    return callback_handler


def stand_aside(tracer: Any, pair: _StandAside | None) -> _StandAside | None:
    """Register (again, where a reset dropped them) ``tracer``'s compile callbacks; returns the
    pair to pass next time and to :func:`withdraw`."""
    handler = _handler()
    if handler is None:
        return pair
    pair = pair or _StandAside(tracer)
    if pair.start not in handler.start_callbacks:
        handler.register_start_callback(pair.start)
    if pair.end not in handler.end_callbacks:
        handler.register_end_callback(pair.end)
    return pair


def withdraw(pair: _StandAside | None) -> None:
    """Remove the callbacks of :func:`stand_aside` (the tracer is closing)."""
    handler = _handler()
    if handler is None or pair is None:
        return
    if pair.start in handler.start_callbacks:
        handler.remove_start_callback(pair.start)
    if pair.end in handler.end_callbacks:
        handler.remove_end_callback(pair.end)
    pair.end(None)
