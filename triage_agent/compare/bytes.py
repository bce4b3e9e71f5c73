"""Byte confirmation: the hash narrows, the bytes settle it.

``confirm_bytes(a_dump, b_dump)`` compares the tensors of one event dumped by both runs:
``.pt`` (a tensor, or a list/tuple/dict of tensors, loaded with ``weights_only=True``; the
only place torch is imported, lazily) or ``.npy``. Per tensor: dtype and shape, the number
of differing elements (by bit pattern: -0.0 differs from 0.0, NaN payloads count), the
maximum ULP distance (floats: distance in the ordered integer line of the format), a
histogram of differing bit positions, and the first differing indices.

Limits: the two dumps must hold the same tensors (names/positions, dtypes, shapes); a
mismatch there is reported, not coerced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..errors import InputError

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_FIRST = 8


class TensorBytes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    dtype: str
    shape: list[int]
    numel: int
    equal: bool
    differing: int = 0
    max_ulp: int | None = Field(default=None, description="floats only")
    bit_histogram: dict[int, int] = Field(
        default_factory=dict, description="bit position (0 = LSB) -> differing elements"
    )
    first_indices: list[list[int]] = Field(default_factory=list)
    note: str = ""


class ByteReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: str
    b: str
    equal: bool
    tensors: list[TensorBytes]


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        return [kv for k in obj for kv in _flatten(obj[k], f"{prefix}{k}.")]
    if isinstance(obj, list | tuple):
        return [kv for i, v in enumerate(obj) for kv in _flatten(v, f"{prefix}{i}.")]
    return [(prefix.rstrip(".") or "tensor", obj)]


def _load(path: Path) -> list[tuple[str, np.ndarray, str, bool]]:
    """(name, raw bits as unsigned ints, dtype name, is_float) for each tensor of a dump."""
    if not path.is_file():
        raise InputError(f"tensor dump not found: {path}")
    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        return [("tensor", *_bits_np(arr))]
    if path.suffix not in (".pt", ".pth"):
        raise InputError(f"{path}: tensor dumps must be .pt or .npy")
    import torch  # deferred: the comparator itself never needs torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        raise InputError(f"{path}: not a loadable tensor dump ({type(exc).__name__})") from None
    out = []
    for name, t in _flatten(obj):
        if not isinstance(t, torch.Tensor):
            continue
        t = t.detach().contiguous().cpu()
        width = t.element_size()
        int_dt = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
        bits = (
            t.view(int_dt).numpy().view(_UINT[width])
            if t.numel()
            else np.zeros(t.shape, _UINT[width])
        )
        out.append((name, bits, str(t.dtype).replace("torch.", ""), t.is_floating_point()))
    return out


def _bits_np(arr: np.ndarray) -> tuple[np.ndarray, str, bool]:
    width = arr.dtype.itemsize
    return np.ascontiguousarray(arr).view(_UINT[width]), str(arr.dtype), arr.dtype.kind == "f"


def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Map float bit patterns to integers whose order is the float order (ULP line)."""
    sign = np.uint64(1) << np.uint64(width * 8 - 1)
    u = bits.astype(np.uint64)
    neg = (u & sign) != 0
    mag = (u & (sign - np.uint64(1))).astype(np.int64)
    return np.where(neg, -mag, mag)


def compare_tensor(name: str, a: np.ndarray, b: np.ndarray, dtype: str, is_float: bool):
    if a.shape != b.shape:
        return TensorBytes(
            name=name,
            dtype=dtype,
            shape=list(a.shape),
            numel=int(a.size),
            equal=False,
            note=f"shapes differ: {list(a.shape)} vs {list(b.shape)}",
        )
    diff = a != b
    n = int(diff.sum())
    rep = TensorBytes(
        name=name,
        dtype=dtype,
        shape=list(a.shape),
        numel=int(a.size),
        equal=n == 0,
        differing=n,
    )
    if n == 0:
        return rep
    width = a.dtype.itemsize
    xa, xb = a[diff], b[diff]
    xor = np.bitwise_xor(xa, xb).astype(np.uint64)
    for bit in range(width * 8):
        c = int(((xor >> np.uint64(bit)) & np.uint64(1)).sum())
        if c:
            rep.bit_histogram[bit] = c
    if is_float:
        rep.max_ulp = int(np.abs(_ordered(xa, width) - _ordered(xb, width)).max())
    idx = np.argwhere(diff)[:_FIRST]
    rep.first_indices = [[int(v) for v in row] for row in idx]
    return rep


def confirm_bytes(a_dump: str | Path, b_dump: str | Path) -> ByteReport:
    """Compare the dumped tensors of one event from both runs, bit for bit."""
    pa, pb = Path(a_dump), Path(b_dump)
    ta, tb = _load(pa), _load(pb)
    if [t[0] for t in ta] != [t[0] for t in tb]:
        raise InputError(
            f"{pa} and {pb} hold different tensors: {[t[0] for t in ta]} vs {[t[0] for t in tb]}"
        )
    out = []
    for (name, a, da, fa), (_, b, db, _) in zip(ta, tb, strict=True):
        if da != db:
            out.append(
                TensorBytes(
                    name=name,
                    dtype=da,
                    shape=list(a.shape),
                    numel=int(a.size),
                    equal=False,
                    note=f"dtypes differ: {da} vs {db}",
                )
            )
            continue
        out.append(compare_tensor(name, a, b, da, fa))
    return ByteReport(a=str(pa), b=str(pb), equal=all(t.equal for t in out), tensors=out)
