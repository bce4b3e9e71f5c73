"""Integer and bool tensors get the order-sensitive digest in every mode, in both tracers:
the xor digest cannot tell token ids in another order apart, and every mask with an even
number of True has the xor digest 0. Floating tensors keep the digest asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from triage_agent.fingerprint import CaptureConfig, Tracer, digest_now
from triage_agent.fingerprint.native import NativeTracer, load, unavailable_reason

# equal xor-sums: one a permutation of the other, or a multiset whose xor is that of zeros
TOKENS = (torch.tensor([[1, 2, 3, 4]]), torch.tensor([[4, 3, 2, 1]]), torch.tensor([[0, 0, 0, 4]]))
MASKS = (
    torch.tensor([True, True, False, False]),
    torch.tensor([False, True, True, False]),
    torch.tensor([False, False, False, False]),
)


def _xor(t: torch.Tensor) -> int:
    return int(torch.hash_tensor(t.view(torch.uint8) if t.dtype == torch.bool else t))


def test_the_cases_collide_under_xor():
    # what the order digest is for: the xor digest of each family is one value
    assert len({_xor(t) for t in TOKENS}) == 1
    assert len({_xor(t) for t in MASKS}) == 1


@pytest.mark.parametrize("mode", ["xor", "both", "order"])
def test_integer_and_bool_digests_tell_the_cases_apart(mode):
    for family in (TOKENS, MASKS):
        recs = [digest_now(t, mode) for t in family]
        assert len({r["digest"] for r in recs}) == len(family), mode
        assert all(r["order"] == r["digest"] for r in recs)
    floats = digest_now(torch.randn(4), mode)
    assert ("order" in floats) == (mode != "xor")


def _trace(make, out: Path) -> list[str]:
    torch.manual_seed(0)
    emb = torch.nn.Embedding(8, 3)
    with make(CaptureConfig(out_dir=out, level="op", digest="xor")) as tr:
        for step, (tokens, mask) in enumerate(zip(TOKENS, MASKS, strict=True)):
            tr.step(step)
            emb(tokens).sum(-1).masked_fill(mask, 0.0)
    lines = (out / "trace_rank00000.jsonl").read_text().splitlines()
    return [ln for ln in lines if '"type":"event"' in ln]


def _int_inputs(lines: list[str]) -> dict[str, set[str]]:
    """dtype -> the digests of that dtype's op inputs, one per step."""
    out: dict[str, set[str]] = {}
    for ev in map(json.loads, lines):
        for d in ev["inputs"]:
            if d and d["dtype"] in ("int64", "bool"):
                out.setdefault(d["dtype"], set()).add(d["digest"])
    return out


def test_python_trace_tells_the_cases_apart(tmp_path):
    got = _int_inputs(_trace(Tracer, tmp_path))
    assert {k: len(v) for k, v in got.items()} == {"int64": 3, "bool": 3}


@pytest.mark.skipif(load() is None, reason=f"no native tracer here: {unavailable_reason()}")
def test_native_trace_tells_the_cases_apart_as_the_python_one(tmp_path):
    native = _trace(NativeTracer, tmp_path / "native")
    got = _int_inputs(native)
    assert {k: len(v) for k, v in got.items()} == {"int64": 3, "bool": 3}
    assert native == _trace(Tracer, tmp_path / "python")
