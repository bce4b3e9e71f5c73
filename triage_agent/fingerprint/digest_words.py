"""The order digest's function over a tensor's bytes read as 32-bit words, in torch ops.

Word ``i`` contributes ``mixA(w ^ keyA(i))`` to one 32-bit lane and ``mixB(w + keyB(i))`` to
a second; each lane is a sum modulo 2**32 (:func:`order_digest_torch`). The constants and the
lane arithmetic are shared by the torch fallback here and the Triton kernel
(:mod:`.digest_triton`), which must return the same value; :mod:`.digest` dispatches between
them.
"""

from __future__ import annotations

import torch

M32 = 0xFFFFFFFF
# multipliers < 2**31, so a 32-bit x 31-bit product stays inside int64 without overflow;
# the Triton kernel uses the same constants in wrapping uint32 arithmetic
MUL = 0x45D9F3B
MUL2 = 0x2C1B3C6D
MUL3 = 0x297A2D39
KA = 0x1E3779B1
KB = 0x05EBCA77
CHUNK = 1 << 15  # words per chunk: small temporaries stay in cache on the CPU


def _mix_a(x: torch.Tensor) -> torch.Tensor:
    # int32 lanes, wrapping multiplies; ``>>`` is arithmetic on int32, hence the masks
    x = x ^ ((x >> 16) & 0xFFFF)
    x.mul_(MUL)
    x = x ^ ((x >> 13) & 0x7FFFF)
    x.mul_(MUL2)
    return x ^ ((x >> 16) & 0xFFFF)


def _mix_b(x: torch.Tensor) -> torch.Tensor:
    x = x * MUL3
    return x ^ ((x >> 15) & 0x1FFFF)


def byte_words(flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """(body as int32 words, zero-padded tail word or None, byte count) of a 1-d int view."""
    b = flat.view(torch.uint8)
    nbytes = b.numel()
    nw = nbytes // 4
    body = b[: nw * 4]
    try:
        body = body.view(torch.int32)
    except RuntimeError:  # a storage offset not aligned to 4 bytes: realign by copying
        body = body.clone().view(torch.int32)
    tail = None
    if nbytes % 4:
        rest = b[nw * 4 :].to(torch.int32)
        shifts = torch.arange(rest.numel(), dtype=torch.int32, device=b.device) * 8
        tail = (rest << shifts).sum(dtype=torch.int32).reshape(1)
    return body, tail, nbytes


def lanes(w: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(start, start + w.numel(), dtype=torch.int64, device=w.device)
    hi = (i >> 32).to(torch.int32)
    lo = (i & M32).to(torch.int32)  # wraps into int32: the same 32 bits
    a = _mix_a(w ^ (lo * KA + hi)).sum(dtype=torch.int64)
    b = _mix_b(w + (lo * KB + hi)).sum(dtype=torch.int64)
    return a, b


def combine(lane_a: torch.Tensor, lane_b: torch.Tensor, nbytes: int) -> torch.Tensor:
    return (((lane_a & M32) << 32) | (lane_b & M32)) ^ length_key(nbytes)


def order_digest_torch(flat: torch.Tensor) -> torch.Tensor:
    """Order-sensitive digest of a 1-d integer view, in torch ops (any device). 0-d int64.

    The tensor's bytes are read as little-endian 32-bit words ``w_i`` (the last one
    zero-padded). Two 32-bit lanes, each a sum modulo 2**32 of per-word mixes keyed by the
    position: lane A sums ``mixA(w ^ (i*KA + (i >> 32)))``, lane B sums
    ``mixB(w + (i*KB + (i >> 32)))``, all in wrapping 32-bit arithmetic. The digest is
    ``A << 32 | B``, xor the mixed byte count.
    """
    body, tail, nbytes = byte_words(flat)
    dev = flat.device
    lane_a = torch.zeros((), dtype=torch.int64, device=dev)
    lane_b = torch.zeros((), dtype=torch.int64, device=dev)
    nw = body.numel()
    for start in range(0, nw, CHUNK):
        a, b = lanes(body[start : start + CHUNK], start)
        lane_a += a
        lane_b += b
    if tail is not None:
        a, b = lanes(tail, nw)
        lane_a += a
        lane_b += b
    return combine(lane_a, lane_b, nbytes)


def length_key(n: int) -> int:
    """Mixed into the order digest so that a zero-extended tensor is not the same tensor."""
    return (n * 0x9E3779B97F4A7C15) & 0x7FFFFFFFFFFFFFFF
