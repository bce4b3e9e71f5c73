"""The order-sensitive digest as a Triton kernel: the same function as the torch fallback.

One pass over the tensor's bytes as 32-bit words; each program sums its share of both
lanes in wrapping uint32 arithmetic and writes two partials; the partials are summed by
torch (integer addition is associative, so the result does not depend on the grid). The
zero-padded tail word (byte counts not divisible by 4) goes through the torch fallback.
``tests/test_digest_gpu.py`` checks kernel == fallback; ``benchmarks/digest_bandwidth.py``
measures it. Importing this module without Triton is fine: :func:`available` says False.
"""

from __future__ import annotations

import torch

from . import digest_words as dw

try:  # Triton ships with CUDA builds of torch; the CPU build has none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised on CPU-only machines
    triton = None
    tl = None


def available() -> bool:
    return triton is not None and torch.cuda.is_available()


if triton is not None:  # pragma: no cover - needs a GPU

    @triton.jit
    def _order_kernel(
        words_ptr,
        partial_ptr,
        n,
        KA: tl.constexpr,
        KB: tl.constexpr,
        MUL: tl.constexpr,
        MUL2: tl.constexpr,
        MUL3: tl.constexpr,
        BLOCK: tl.constexpr,
        ITERS: tl.constexpr,
    ):
        pid = tl.program_id(0)
        acc_a = tl.zeros([BLOCK], dtype=tl.uint32)
        acc_b = tl.zeros([BLOCK], dtype=tl.uint32)
        base = pid.to(tl.int64) * BLOCK * ITERS
        lanes = tl.arange(0, BLOCK).to(tl.int64)
        ka = tl.full([BLOCK], KA, tl.uint32)
        kb = tl.full([BLOCK], KB, tl.uint32)
        m1 = tl.full([BLOCK], MUL, tl.uint32)
        m2 = tl.full([BLOCK], MUL2, tl.uint32)
        m3 = tl.full([BLOCK], MUL3, tl.uint32)
        zero = tl.zeros([BLOCK], dtype=tl.uint32)
        for it in range(ITERS):
            offs = base + it * BLOCK + lanes
            mask = offs < n
            w = tl.load(words_ptr + offs, mask=mask, other=0)
            lo = offs.to(tl.uint32)
            hi = (offs >> 32).to(tl.uint32)
            x = w ^ (lo * ka + hi)
            x = x ^ (x >> 16)
            x = x * m1
            x = x ^ (x >> 13)
            x = x * m2
            x = x ^ (x >> 16)
            y = (w + (lo * kb + hi)) * m3
            y = y ^ (y >> 15)
            acc_a += tl.where(mask, x, zero)
            acc_b += tl.where(mask, y, zero)
        sa = tl.sum(acc_a.to(tl.uint64), axis=0)
        sb = tl.sum(acc_b.to(tl.uint64), axis=0)
        tl.store(partial_ptr + pid * 2, sa.to(tl.int64))
        tl.store(partial_ptr + pid * 2 + 1, sb.to(tl.int64))


BLOCK = 1024
ITERS = 16


def order_digest_cuda(flat: torch.Tensor) -> torch.Tensor:  # pragma: no cover - needs a GPU
    """Same value as :func:`.digest_words.order_digest_torch`, asynchronously on the current stream."""
    body, tail, nbytes = dw.byte_words(flat)
    nw = body.numel()
    lane_a = torch.zeros((), dtype=torch.int64, device=flat.device)
    lane_b = torch.zeros((), dtype=torch.int64, device=flat.device)
    if nw:
        programs = triton.cdiv(nw, BLOCK * ITERS)
        partial = torch.empty(programs * 2, dtype=torch.int64, device=flat.device)
        _order_kernel[(programs,)](
            body.view(torch.uint32),
            partial,
            nw,
            KA=dw.KA,
            KB=dw.KB,
            MUL=dw.MUL,
            MUL2=dw.MUL2,
            MUL3=dw.MUL3,
            BLOCK=BLOCK,
            ITERS=ITERS,
        )
        lane_a += partial[0::2].sum()
        lane_b += partial[1::2].sum()
    if tail is not None:
        a, b = dw.lanes(tail, nw)
        lane_a += a
        lane_b += b
    return dw.combine(lane_a, lane_b, nbytes)
