"""GPU: the Triton order digest equals the CPU fallback, bit for bit.

Run: python -m pytest -q -m gpu tests/test_digest_gpu.py
"""

import pytest
import torch

from triage_agent.fingerprint import digest as dg
from triage_agent.fingerprint import digest_triton


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 3, 1000, 1 << 20, (1 << 22) + 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8])
def test_digest_gpu_triton_equals_cpu_fallback(n, dtype):
    assert digest_triton.available()
    t = (
        torch.randint(-100, 100, (n,)).to(dtype)
        if not dtype.is_floating_point
        else torch.randn(n).to(dtype)
    )
    cpu = dg.digest_now(t, "both")
    gpu = dg.digest_now(t.cuda(), "both")
    assert gpu == cpu
