"""Digests of a tensor's raw bit pattern, computed on its own device and read back later.

Why bits: bf16 and fp32 tensors holding equal values are different tensors, ``-0.0`` is not
``0.0`` and NaN payloads matter, so every digest starts from an integer *bitcast* of the
storage (never an upcast value). Two digests:

* ``xor``: ``torch.hash_tensor`` over the integer view. Fast, but blind to permutations
  (and two equal elements cancel): it answers "same multiset of bit patterns".
* ``order``: a position-weighted mix over the tensor's bytes read as 32-bit words. Word
  ``i`` contributes ``mixA(w ^ keyA(i))`` to one 32-bit lane and ``mixB(w + keyB(i))`` to a
  second; each lane is a sum modulo 2**32 and the digest is the two lanes side by side
  (see :func:`.digest_words.order_digest_torch`). Shape and dtype are in the record beside it. A swap of
  two different elements changes the sum, so routing maps, sort indices and dispatch
  buffers are covered. The function is defined on the word sequence, so the CPU fallback
  (torch, chunked to bound memory) and the Triton kernel return the same value.

Integer and bool tensors always get the order digest, in every mode, as the record's
``digest`` (and its ``order``): they are small (indices, token ids, masks) and the xor digest
is weak exactly there: token ids in ``[0, 64)`` xor to 6 bits, so two different batches
collide one time in 64, and a mask with an even number of True xors to 0. Floating and
complex tensors keep the mode asked for. Trace schema version 2 says so (see
:mod:`triage_agent.trace_format`).

Staging: :func:`stage` returns 0-d int64 *device* tensors and never synchronises;
:func:`readback` turns a whole step's worth of them into Python ints with one copy per
device. That is the only host/device synchronisation the tracer performs.

Limits: non-contiguous tensors are digested in logical (row-major) order through a copy;
complex tensors are digested as their real/imaginary pairs; sparse, nested, quantized and
meta tensors are not digested (:func:`stage` returns ``None`` for them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from .config import DigestMode
from .digest_words import order_digest_torch

EMPTY = "empty"
# Memory no op has written yet (the output of empty*, or its alias before the first write):
# its bytes are noise, so both runs record the same sentinel as the digest (the bytes' own
# digest beside it, as 'value' and 'value_order').
UNINITIALIZED = "uninitialized"

_SIGNED_BY_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def int_view(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit pattern as a contiguous 1-d signed-integer tensor (no value change)."""
    x = t.detach()
    if x.is_complex():
        x = torch.view_as_real(x.resolve_conj())
    if x.dtype == torch.bool:
        x = x.to(torch.uint8) if x.device.type == "meta" else x.view(torch.uint8)
    x = x.contiguous().reshape(-1)
    size = x.element_size()
    return x.view(_SIGNED_BY_SIZE[size])


def order_digest(flat: torch.Tensor) -> torch.Tensor:
    """Dispatch: the Triton kernel on CUDA when importable, else the torch fallback."""
    if flat.is_cuda:
        from . import digest_triton

        if digest_triton.available():
            return digest_triton.order_digest_cuda(flat)
    return order_digest_torch(flat)


def xor_digest(flat: torch.Tensor) -> torch.Tensor:
    """0-d uint64 ``hash_tensor`` of an integer view (readback reads it as 64 bits)."""
    return torch.hash_tensor(flat)


@dataclass(slots=True)
class Staged:
    """A digest in flight: metadata now, device values resolved at the step boundary."""

    shape: Sequence[int]  # a list or a torch.Size; the record holds a list
    dtype: str
    numel: int
    xor: torch.Tensor | None  # 0-d int64 on the tensor's device
    order: torch.Tensor | None
    xor_value: int | None = None
    order_value: int | None = None
    uninitialized: bool = False
    # (digest of the allocation when an empty* op returned it, its digest now): equal after
    # readback means nothing has written the memory yet, so this record is UNINITIALIZED
    pristine: tuple[Staged, Staged] | None = None

    def record(self) -> dict[str, object]:
        shape = list(self.shape)
        if self.numel == 0:
            return {"shape": shape, "dtype": self.dtype, "numel": 0, "digest": EMPTY}
        rec: dict[str, object] = {"shape": shape, "dtype": self.dtype, "numel": self.numel}
        digest = _hex(self.xor_value) if self.xor_value is not None else "none"
        order = _hex(self.order_value) if self.order_value is not None else None
        if self.uninitialized or self.pristine is not None and _unwritten(*self.pristine):
            rec["digest"] = UNINITIALIZED
            # "Unwritten" is read from bytes the allocator left behind, which differ between
            # launches; the bytes themselves are kept so that a comparison can fall back on
            # them where only one run calls the memory unwritten.
            if self.xor_value is not None:
                rec["value"] = digest
                if order is not None:
                    rec["value_order"] = order
            return rec
        rec["digest"] = digest
        if order is not None:
            rec["order"] = order
        return rec


def _unwritten(then: Staged, now: Staged) -> bool:
    return (then.xor_value, then.order_value) == (now.xor_value, now.order_value)


def _hex(v: int) -> str:
    return f"{v & 0xFFFFFFFFFFFFFFFF:016x}"


# dtype -> (record name, signed integer dtype of the same width for a bitcast view, or None
# where only the general path is right: complex and bool go through int_view; whether its
# digest is the order digest whatever the mode)
_DTYPES: dict[torch.dtype, tuple[str, torch.dtype | None, bool]] = {}
# the native tracer names the same ScalarTypes (capture.cpp, always_ordered)
ORDERED_DTYPES = frozenset(
    {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
    | {getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)}
)


def _dtype_info(dt: torch.dtype) -> tuple[str, torch.dtype | None, bool]:
    info = _DTYPES.get(dt)
    if info is None:
        name = str(dt).removeprefix("torch.")
        direct = None
        if not dt.is_complex and dt != torch.bool:
            direct = _SIGNED_BY_SIZE.get(dt.itemsize)
        info = _DTYPES[dt] = (name, direct, dt in ORDERED_DTYPES)
    return info


def stage(t: torch.Tensor, mode: DigestMode = "xor") -> Staged | None:
    """Queue the digest of ``t`` on its device. No synchronisation, no readback.

    In ``xor`` mode a real tensor is hashed through a same-width integer view of itself,
    with no copy even when it is not contiguous: the xor reduction does not depend on the
    order it visits elements, and the view reads the logical elements (repeats of an
    expanded tensor included) exactly as the contiguous copy would. Two kernels at most
    per tensor, none of them a copy. Integer and bool tensors are digested in ``order``
    mode whatever ``mode`` says (see the module docstring).
    """
    if t.layout != torch.strided or t.is_quantized or t.is_nested or t.is_meta:
        return None
    name, direct, ordered = _DTYPES.get(t.dtype) or _dtype_info(t.dtype)
    n = t.numel()
    if n == 0:
        return Staged(t.shape, name, 0, None, None)
    if ordered:
        mode = "order"
    if mode == "xor" and direct is not None and not t.is_neg():
        # an integer view of a tensor that requires grad does not require grad: no graph
        return Staged(t.shape, name, n, torch.hash_tensor(t.view(direct)), None)
    flat = int_view(t)
    xor = xor_digest(flat) if mode in ("xor", "both") else None
    order = order_digest(flat) if mode in ("order", "both") else None
    if xor is None:
        # the record always carries a 'digest'; in order-only mode it is the order digest
        xor = order
    return Staged(t.shape, name, n, xor, order)


def readback(staged: Iterable[Staged | None]) -> None:
    """Resolve every pending digest: one stacked device-to-host copy per device and dtype.

    A digest shared by several tensors of one event is read once; so are the allocation
    digests a ``pristine`` check compares. Values are 0-d int64 or uint64 (``hash_tensor``'s
    own type) tensors; both are read as 64-bit patterns.
    """
    groups: dict[tuple[torch.device, torch.dtype], list[tuple[Staged, str, torch.Tensor]]] = {}
    seen: set[int] = set()
    for s in _with_checks(staged):
        if s is None or s.numel == 0 or id(s) in seen:
            continue
        seen.add(id(s))
        for attr in ("xor", "order"):
            v = getattr(s, attr)
            if v is not None and getattr(s, attr + "_value") is None:
                groups.setdefault((v.device, v.dtype), []).append((s, attr, v))
    for items in groups.values():
        values = torch.stack([v for _, _, v in items]).view(torch.int64).cpu().tolist()
        for (s, attr, _), value in zip(items, values, strict=True):
            setattr(s, attr + "_value", value)
            setattr(s, attr, None)


def _with_checks(staged: Iterable[Staged | None]) -> Iterable[Staged | None]:
    for s in staged:
        yield s
        if s is not None and s.pristine is not None:
            yield from s.pristine


def digest_now(t: torch.Tensor, mode: DigestMode = "both") -> dict[str, object] | None:
    """Stage and read back one tensor at once: for tests, dumps and offline use (it syncs)."""
    s = stage(t, mode)
    if s is None:
        return None
    readback([s])
    return s.record()


def digest_many(ts: Sequence[torch.Tensor], mode: DigestMode = "both") -> list[dict | None]:
    staged = [stage(t, mode) for t in ts]
    readback(staged)
    return [s.record() if s is not None else None for s in staged]
