"""Memory an ``empty*`` op returned: the record must follow the bytes, not the allocator.

Whether a buffer counts as unwritten is read from what the allocator left in it, which
differs between launches. These tests fix that leftover by construction, so that each one
holds the case a launch would meet only by chance.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from triage_agent.compare import compare_runs, load_runs
from triage_agent.fingerprint import CaptureConfig, Tracer
from triage_agent.fingerprint.digest import digest_now
from triage_agent.trace_format import TraceEvent


def _events(path):
    return [
        TraceEvent.model_validate(r)
        for r in map(json.loads, (path / "trace_rank00000.jsonl").read_text().splitlines())
        if r["type"] == "event"
    ]


def _neg_input(path):
    return next(e for e in _events(path) if e.name == "aten::neg").inputs[0]


def _trace_refill(out, refill) -> np.ndarray:
    """empty, a write no ATen op makes (a C++ kernel's looks like this), then a read.

    ``refill(leftover)`` gives the bytes written, from the bytes the allocator left there."""
    with Tracer(CaptureConfig(out_dir=out, steps=(0, 0), level="op")) as tr:
        tr.step(0)
        buf = torch.empty(64)
        value = refill(buf.numpy().copy())
        buf.numpy()[:] = value
        torch.neg(buf)
        tr.end_step()
    return value


def test_a_write_equal_to_the_leftover_compares_equal_to_one_that_is_not(tmp_path):
    # garbage for the allocator to hand back: the leftover is not a page of zeros
    junk = torch.randn(64)
    del junk
    written = _trace_refill(tmp_path / "a", lambda leftover: leftover)
    # a buffer of its own for run b (a's bytes still live elsewhere): its leftover differs
    held = torch.from_numpy(written.copy())
    seen = {}

    def same_bytes(leftover):
        seen["leftover"] = leftover
        return written

    _trace_refill(tmp_path / "b", same_bytes)
    assert not np.array_equal(seen["leftover"].view(np.int32), written.view(np.int32))
    a, b = _neg_input(tmp_path / "a"), _neg_input(tmp_path / "b")
    assert b.digest == digest_now(held, "xor")["digest"]
    # a calls the memory unwritten (its bytes are the leftover), but keeps what they are
    assert a.digest == "uninitialized" and a.value == b.digest
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


def test_another_tensor_at_a_swapped_buffers_old_address_is_not_uninitialized(tmp_path):
    src = torch.arange(64, dtype=torch.float32)
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")) as tr:
        tr.step(0)
        buf = torch.empty(64)
        old = buf.numpy()  # keeps the allocation's memory alive at its address
        # the buffer moves to a storage holding the bytes it was allocated with
        buf.data = buf.clone()
        # another tensor, version 0, on the old address; written outside the dispatcher
        other = torch.from_numpy(old).view(8, 8)
        assert other.data_ptr() != buf.data_ptr() and other._version == 0
        old[:] = src.numpy()
        torch.neg(other)
        tr.end_step()
    got = _neg_input(tmp_path)
    assert got.digest == digest_now(src.view(8, 8), "xor")["digest"]


def test_an_empty_output_keeps_the_digest_of_its_bytes(tmp_path):
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op", digest="both")) as tr:
        tr.step(0)
        buf = torch.empty(16)
        held = buf.clone()
        tr.end_step()
    out = next(e for e in _events(tmp_path) if e.name.startswith("aten::empty")).outputs[0]
    want = digest_now(held, "both")
    assert out.digest == "uninitialized"
    assert (out.value, out.value_order) == (want["digest"], want["order"])
