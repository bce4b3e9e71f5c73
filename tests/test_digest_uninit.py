"""Memory an ``empty*`` op returned: the record must follow the bytes, not the allocator.

Whether a buffer counts as unwritten is read from what the allocator left in it, which
differs between launches. These tests fix that leftover by construction, so that each one
holds the case a launch would meet only by chance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from triage_agent.compare import compare_runs, load_runs
from triage_agent.fingerprint import CaptureConfig
from triage_agent.fingerprint.digest import digest_now
from triage_agent.fingerprint.native import load, make_tracer, unavailable_reason
from triage_agent.trace_format import TraceEvent

# the C++ tracer keeps the (address, version) rule without the unchanged-bytes check: the
# tests of a storage that moved away hold for both, those of a refill for the Python one
BACKENDS = [
    "python",
    pytest.param(
        "native",
        marks=pytest.mark.skipif(
            load(build_missing=False) is None,
            reason=f"the native tracer is not built here: {unavailable_reason()}",
        ),
    ),
]


def _events(path):
    return [
        TraceEvent.model_validate(r)
        for r in map(json.loads, (path / "trace_rank00000.jsonl").read_text().splitlines())
        if r["type"] == "event"
    ]


def _neg_input(path):
    return next(e for e in _events(path) if e.name == "aten::neg").inputs[0]


def _tracer(out, backend="python", **kw):
    return make_tracer(CaptureConfig(out_dir=out, steps=(0, 0), level="op", **kw), backend=backend)


def _trace_refill(out, refill, backend="python") -> np.ndarray:
    """empty, a write no ATen op makes (a C++ kernel's looks like this), then a read.

    ``refill(leftover)`` gives the bytes written, from the bytes the allocator left there."""
    with _tracer(out, backend) as tr:
        tr.step(0)
        buf = torch.empty(64)
        value = refill(buf.numpy().copy())
        buf.numpy()[:] = value
        torch.neg(buf)
        tr.end_step()
    return value


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_equal_to_the_leftover_compares_equal_to_one_that_is_not(tmp_path, backend):
    # garbage for the allocator to hand back: the leftover is not a page of zeros
    junk = torch.randn(64)
    del junk
    written = _trace_refill(tmp_path / "a", lambda leftover: leftover, backend)
    # a buffer of its own for run b (a's bytes still live elsewhere): its leftover differs
    held = torch.from_numpy(written.copy())
    # the allocator may hand b the very block a freed, bytes and all: fill that block with
    # other bytes first, so b's leftover differs by construction, not by chance
    # (several blocks: the tracer's own allocations of that size may take the first ones,
    # and the block a's run freed, still holding a's bytes, must not be the one b is handed)
    scratch = [torch.empty(64) for _ in range(16)]
    for block in scratch:
        block.numpy().view(np.int32)[:] = ~written.view(np.int32)
    del scratch, block
    seen = {}

    def same_bytes(leftover):
        seen["leftover"] = leftover
        return written

    _trace_refill(tmp_path / "b", same_bytes, backend)
    assert not np.array_equal(seen["leftover"].view(np.int32), written.view(np.int32))
    a, b = _neg_input(tmp_path / "a"), _neg_input(tmp_path / "b")
    want = digest_now(held, "xor")["digest"]
    assert want in (b.digest, b.value) and want in (a.digest, a.value)
    if backend == "python":
        # it sees b's write change the bytes; a's bytes are the leftover, so a's memory is
        # called unwritten (the C++ tracer sees neither write)
        assert b.digest == want and a.digest == "uninitialized"
    assert compare_runs(*load_runs(tmp_path / "a", tmp_path / "b")).status == "identical"


def test_a_different_write_still_differs_where_one_run_calls_it_unwritten(tmp_path):
    junk = torch.randn(64)
    del junk
    _trace_refill(tmp_path / "a", lambda leftover: leftover)

    def one_bit_off(leftover):
        leftover.view(np.int32)[5] ^= 1  # one word: the xor digest is blind to pairs
        return leftover

    _trace_refill(tmp_path / "b", one_bit_off)
    assert _neg_input(tmp_path / "a").digest == "uninitialized"
    assert compare_runs(*load_runs(tmp_path / "a", tmp_path / "b")).status == "diverged"


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_tensor_at_a_swapped_buffers_old_address_is_not_uninitialized(tmp_path, backend):
    src = torch.arange(64, dtype=torch.float32)
    with _tracer(tmp_path, backend) as tr:
        tr.step(0)
        buf = torch.empty(64)
        kept = buf.untyped_storage()  # the allocation's memory stays at its address
        old = buf.numpy()
        # the buffer moves to a storage holding the bytes it was allocated with
        buf.data = buf.clone()
        # another tensor, version 0, at the old address; written outside the dispatcher
        other = torch.from_numpy(old).view(8, 8)
        assert kept.data_ptr() == other.data_ptr()
        assert other.data_ptr() != buf.data_ptr() and other._version == 0
        old[:] = src.numpy()
        torch.neg(other)
        tr.end_step()
    got = _neg_input(tmp_path)
    assert got.digest == digest_now(src.view(8, 8), "xor")["digest"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_output_keeps_the_digest_of_its_bytes(tmp_path, backend):
    with _tracer(tmp_path, backend, digest="both") as tr:
        tr.step(0)
        buf = torch.empty(16)
        held = buf.clone()
        tr.end_step()
    out = next(e for e in _events(tmp_path) if e.name.startswith("aten::empty")).outputs[0]
    want = digest_now(held, "both")
    assert out.digest == "uninitialized"
    assert (out.value, out.value_order) == (want["digest"], want["order"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_that_outlives_its_empty_tensor_is_uninitialized_until_written(tmp_path, backend):
    # nn.Parameter(torch.empty(...)) then an init: the empty tensor dies, its storage lives on
    # in the parameter; the init's input is the allocator's leftover, noise in every launch
    with _tracer(tmp_path, backend) as tr:
        tr.step(0)
        p = torch.nn.Parameter(torch.empty(8, 8))
        with torch.no_grad():
            p.uniform_()
        tr.end_step()
    init = next(e for e in _events(tmp_path) if e.name.startswith("aten::uniform_"))
    assert init.inputs[0].digest == "uninitialized"
    assert init.outputs[0].digest not in ("uninitialized", "none")
