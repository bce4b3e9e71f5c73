"""GPU: an atomic index_add_ traced twice at op level shows where run-to-run bits diverge.

Run: python -m pytest -q -m gpu tests/test_capture_gpu.py tests/test_digest_gpu.py
"""

import json

import pytest
import torch

from triage_agent.fingerprint import CaptureConfig, Tracer


class Scatter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(256, 256)

    def forward(self, x, idx):
        h = self.proj(x)
        out = torch.zeros(64, 256, device=x.device, dtype=x.dtype)
        return out.index_add_(0, idx, h)  # float atomics on CUDA: order varies per run


def _trace(tmp_path, name):
    torch.manual_seed(0)
    m = Scatter().cuda()
    x = torch.randn(1 << 16, 256, device="cuda")
    idx = torch.randint(0, 64, (1 << 16,), device="cuda")
    cfg = CaptureConfig(out_dir=tmp_path / name, steps=(0, 0), level="op")
    with Tracer(cfg) as tr:
        tr.step(0)
        m(x, idx)
    lines = (tmp_path / name / "trace_rank00000.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == "event" and e["kind"] == "op"]


@pytest.mark.gpu
def test_capture_gpu_index_add_is_the_first_divergent_op(tmp_path):
    for attempt in range(5):  # atomics usually differ at once; retry a few times if not
        a, b = _trace(tmp_path, f"a{attempt}"), _trace(tmp_path, f"b{attempt}")
        assert [e["name"] for e in a] == [e["name"] for e in b]
        at = next(i for i, e in enumerate(a) if e["name"].startswith("aten::index_add"))
        for ea, eb in zip(a[:at], b[:at], strict=True):
            assert ea["outputs"] == eb["outputs"], ea["name"]
        if a[at]["outputs"] != b[at]["outputs"]:
            assert a[at]["inputs"] == b[at]["inputs"]
            return
    pytest.fail("index_add_ gave identical bits in 5 attempts: no nondeterminism observed")
