"""The tracer with its per-event host path in C++: :class:`NativeTracer`.

It is a :class:`~triage_agent.fingerprint.capture.Tracer` (the same step boundaries, module
hooks, collectives, optimizer events and trace files) with three parts replaced:

* every digest is staged by the extension: one raw kernel launch for all the tensors of a
  call (a module's inputs and weights, an op's outputs), computing the XOR and, where asked,
  the order digest in one pass over the bytes; values equal the Python path's
  (:mod:`..digest`) for the same tensor, on the CPU and on CUDA;
* at op level, ATen ops are observed by a RecordFunction callback in C++ instead of a
  Python dispatch mode; the op events are kept in C++ and written as trace lines at the
  step boundary, in the same format (the comparator reads them unchanged);
* the tensors of one event share digests; with ``cache=True`` a digest is also reused by
  later events while no op has written its storage (version counter bumped or not: at op
  level every op is seen, at module level a write-watching observer is on). That reuse is
  off by default: a write outside the dispatcher (a numpy view, a C++ extension called
  directly) is seen by nothing, and a wrong digest is worse than a slow one.

With ``side_stream=True`` the digests of CUDA tensors run on a stream of their own that
waits for the producer; the caching allocator is told the stream reads each tensor; every
op that writes (and every optimizer step) first waits for the pending digests.

Limits: the op events are those a dispatch mode sees where the mode does not change the
program; a Python dispatch mode itself changes a few things (it makes autograd save
detached outputs and accumulate gradients out of place), so an op-level trace of a
backward pass differs there from the Python path's, event for event. Op-level dumps need
the Python path. A kernel that bypasses the dispatcher (a C++/CUDA extension called
directly) and writes in place is not seen: with the side stream such a write is ordered
after pending digests only at optimizer steps.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..capture import Tracer, _caller
from ..config import CaptureConfig
from ..digest import DigestMode, Staged, _dtype_info
from . import loader

_FLAGS: dict[str, int] = {"xor": 1, "order": 2, "both": 3}
_NO_DIGEST, _UNINITIALIZED, _EMPTY = -1, -2, -3
# uninitialised memory whose bytes were digested all the same: _UNINIT_BASE - digest index
_UNINIT_BASE = -16
_OBSERVE_OFF, _OBSERVE_WRITES, _OBSERVE_OPS = 0, 1, 2


class NativeUnavailable(RuntimeError):
    """The extension could not be built or loaded here; the Python tracer still works."""


def _all_dtypes() -> list[torch.dtype]:
    return [v for v in vars(torch).values() if isinstance(v, torch.dtype)]


def _op_caller() -> str | None:
    # two frames above capture._caller, as from its own op hook: the walk starts at the op.
    # On an autograd thread there is no Python frame to walk: the Python path finds only
    # its own and torch's there, and records no caller either.
    try:
        return _caller()
    except ValueError:
        return None


def _rng_hex(state: bytes) -> str:
    # the Python path's generator digest (capture.Tracer._generator_digest)
    return hashlib.blake2b(state, digest_size=8).hexdigest()


class _NativeLine:
    """An op event the extension rendered: already a trace line, with no digests pending."""

    __slots__ = ("seq", "line")

    def __init__(self, seq: int, line: str):
        self.seq = seq
        self.line = line

    def staged(self) -> tuple:
        return ()

    def to_json(self, rec_of: Any = None) -> str:
        return self.line


class _Mirror:
    """A tracer attribute whose every assignment is also told to the extension's observer."""

    def __init__(self, tell: Callable[[Any, Any], None]):
        self.tell = tell

    def __set_name__(self, owner, name: str) -> None:
        self.key = f"_native{name}"

    def __get__(self, obj, objtype=None):
        return self if obj is None else obj.__dict__[self.key]

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.key] = value
        self.tell(obj, value)


class _ScopeStack(list):
    """The tracer's module stack; every change is mirrored to the extension's op observer."""

    __slots__ = ("_on_change",)

    def __init__(self, items, on_change):
        super().__init__(items)
        self._on_change = on_change

    def append(self, item) -> None:
        super().append(item)
        self._on_change(self)

    def pop(self, *args):
        item = super().pop(*args)
        self._on_change(self)
        return item

    def clear(self) -> None:
        super().clear()
        self._on_change(self)


class NativeTracer(Tracer):
    """See the module docstring. Raises :class:`NativeUnavailable` where it cannot run."""

    TRACER = "native"

    def __init__(
        self, config: CaptureConfig, *, side_stream: bool = False, cache: bool = False, **base: Any
    ):
        """``base``: the keywords of :class:`Tracer` (rank, world_size, auto_steps)."""
        mod = loader.load()
        if mod is None:
            raise NativeUnavailable(loader.unavailable_reason() or "native tracer unavailable")
        if config.level == "op" and config.dump:
            raise NativeUnavailable("op-level dumps need the Python tracer")
        self._native = mod.State(
            side_stream=side_stream,
            cache=cache,
            base_mode=_FLAGS[config.digest],
            order_names=list(config.order_names),
        )
        with warnings.catch_warnings():  # experimental and deprecated dtypes say so when made
            warnings.simplefilter("ignore")
            for dt in _all_dtypes():
                try:
                    self._native.set_dtype(torch.empty(0, dtype=dt), _dtype_info(dt)[0])
                except (RuntimeError, TypeError):  # a dtype with no tensors (placeholders)
                    continue
        self._native.set_caller(_op_caller)
        self.side_stream = side_stream
        self._watch_writes = side_stream or cache
        self._pending: list[tuple[Staged, int]] = []
        self._native_scope_ok: dict[str, bool] = {}
        self._scope_filter = config.scope
        super().__init__(config, **base)
        self._native.set_outside_in_scope(self._native_in_scope(""))

    # -- tracer state the op observer reads, mirrored on every change ------------------
    def _native_in_scope(self, scope: str) -> bool:
        ok = self._native_scope_ok.get(scope)
        if ok is None:
            pat = self._scope_filter
            ok = self._native_scope_ok[scope] = pat is None or bool(re.search(pat, scope))
        return ok

    @property
    def digests_staged(self) -> int:
        """Digests computed so far (reuses not counted), by hooks and op observer alike."""
        return self._native.digests_staged

    @digests_staged.setter
    def digests_staged(self, _: int) -> None:
        pass  # counted in C++

    _suspended = _Mirror(lambda tr, v: tr._native.set_suspended(v > 0))
    _in_optimizer = _Mirror(lambda tr, v: tr._native.set_in_optimizer(v > 0))
    _bwd_scope = _Mirror(
        lambda tr, scope: tr._native.set_backward_scope(
            tr._native.scope_id(scope), tr._native_in_scope(scope)
        )
    )

    @property
    def _stack(self) -> list:
        return self.__dict__["_n_stack"]

    @_stack.setter
    def _stack(self, items: list) -> None:
        self.__dict__["_n_stack"] = _ScopeStack(items, self._forward_scope_changed)
        self._forward_scope_changed(items)

    def _forward_scope_changed(self, stack: list) -> None:
        if stack:
            scope = stack[-1][0]
            self._native.set_forward_scope(
                self._native.scope_id(scope), self._native_in_scope(scope)
            )
        else:
            self._native.set_forward_scope(-1, True)

    # -- the parts replaced --------------------------------------------------------------
    def _activate(self) -> None:
        super()._activate()
        if self._mode is not None:  # op level: the C++ observer takes the dispatch mode's place
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        self._native.begin_step()
        self._pending.clear()
        if self.config.level == "op":
            self._native.observe(_OBSERVE_OPS)
        elif self._watch_writes:
            self._native.observe(_OBSERVE_WRITES)

    def _deactivate(self) -> None:
        self._native.observe(_OBSERVE_OFF)
        super()._deactivate()

    def _stage_all(
        self, ts: list[torch.Tensor], mode: DigestMode, allocated: bool = False
    ) -> list[Staged | None]:
        # ``allocated`` (outputs of an ``empty*`` op) is not used here: the native path keeps
        # the (address, version) rule for uninitialised memory, not the Python path's
        # unchanged-bytes check (see docs/tracer_speed.md); like it, it trusts an address only
        # while the storage empty* returned lives there, and keeps the bytes' digest.
        if not ts:
            return []
        codes = self._native.stage(ts, _FLAGS[mode], False)
        out: list[Staged | None] = []
        pending = self._pending
        for t, code in zip(ts, codes, strict=True):
            if code == _NO_DIGEST:
                out.append(None)
                continue
            name = _dtype_info(t.dtype)[0]
            if code == _EMPTY:
                s = Staged(t.shape, name, 0, None, None)
            elif code == _UNINITIALIZED:
                s = Staged(t.shape, name, t.numel(), None, None, uninitialized=True)
            elif code <= _UNINIT_BASE:
                s = Staged(t.shape, name, t.numel(), None, None, uninitialized=True)
                pending.append((s, _UNINIT_BASE - code))
            else:
                s = Staged(t.shape, name, t.numel(), None, None)
                pending.append((s, code))
            out.append(s)
        return out

    def _new_event(self, kind, name, scope, phase, inputs, caller=None):
        ev = super()._new_event(kind, name, scope, phase, inputs, caller)
        ev.seq = self._native.next_seq()  # one order for Python and C++ events
        return ev

    def _collect_native(self) -> None:
        """Resolve the step's digests and merge the op events into the event list, by seq."""
        self._native.observe(_OBSERVE_OFF)
        digest, order, lines = self._native.flush(self.cur_step, _rng_hex)
        for s, code in self._pending:
            s.xor_value = digest[code]
            s.order_value = order[code]
        self._pending.clear()
        if lines:
            ops = [_NativeLine(seq, line) for seq, line in lines]
            self._events = list(heapq.merge(self._events, ops, key=lambda e: e.seq))

    def _end_step(self) -> None:
        if self._active and self.cur_step is not None:
            self._collect_native()
        super()._end_step()

    def close(self, status: str = "ok", note: str = "") -> None:
        if not self._closed and self._active and self.cur_step is not None:
            # op events live in C++ until now: an auto step with only those still ran
            self._collect_native()
        super().close(status, note)
        self._native.release()

    def _on_optimizer_pre(self, opt, args, kwargs) -> None:
        super()._on_optimizer_pre(opt, args, kwargs)
        if self.side_stream:
            # an optimizer may update in place with kernels the dispatcher never sees
            self._native.guard()


def make_tracer(config: CaptureConfig, *, backend: str = "auto", **kwargs) -> Tracer:
    """A tracer for ``config``: ``native``, ``python``, or ``auto`` (native where it can run)."""
    side = kwargs.pop("side_stream", False)
    if backend == "python":
        return Tracer(config, **kwargs)
    try:
        return NativeTracer(config, side_stream=side, **kwargs)
    except NativeUnavailable:
        if backend == "native":
            raise
        return Tracer(config, **kwargs)


def injected_tracer(config: CaptureConfig, **kwargs) -> Tracer:
    """The tracer an injected process installs: the native one where a current build is there
    (never built here: a rank must not compile inside its timeout), else the Python one with
    a note in its end record saying why. The header's ``tracer`` says which one wrote."""
    why = ""
    if loader.load(build_missing=False) is not None:
        try:
            return NativeTracer(config, **kwargs)
        except NativeUnavailable as exc:
            why = str(exc)
    tracer = Tracer(config, **kwargs)
    why = why or loader.unavailable_reason() or "unavailable"
    tracer._notes.append(f"traced by the Python tracer: the native one is not used ({why})")
    return tracer
