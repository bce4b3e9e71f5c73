"""GPU reproducers (skipped without CUDA) and the GPU suite's plan (runs anywhere)."""

from __future__ import annotations

import pytest

from reproducers.generator import generate
from reproducers.gpu_suite import run_suite, suite
from reproducers.launcher import launch
from triage_agent.ledger import Ledger


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_gpu_suite_rows_are_valid_reproducers(tmp_path, gpus):
    for row in suite(gpus):
        gen = generate({"template": row["template"], "params": row["params"]}, tmp_path)
        assert gen.template == row["template"]
    nccl = [r for r in suite(gpus) if r["params"].get("backend") == "nccl"]
    assert all("skip" in r for r in nccl) is (gpus < 2)


def _launch(ws, template, params):
    gen = generate({"template": template, "params": params}, ws, ledger=Ledger(ws))
    ev = launch(gen.id, ws, timeout_s=600)
    assert ev.result.value != "error", ev.summary
    return ev, ev.data.output


@pytest.mark.gpu
def test_op_repeatability_cuda_deterministic_is_repeatable(tmp_path):
    ev, out = _launch(
        tmp_path,
        "op_repeatability",
        {"op": "index_add_", "device": "cuda", "repeats": 20, "deterministic": True},
    )
    assert out["status"] == "ok" and out["details"]["device"] == "cuda"
    assert out["supported"] is (len(set(out["digests"]["runs"])) > 1)


@pytest.mark.gpu
def test_op_repeatability_cuda_nondeterministic_verdict_follows_bytes(tmp_path):
    ev, out = _launch(
        tmp_path, "op_repeatability", {"op": "index_add_", "device": "cuda", "repeats": 20}
    )
    assert out["supported"] is (out["details"]["distinct_outputs"] > 1)


@pytest.mark.gpu
def test_async_lifetime_runs_on_cuda(tmp_path):
    ev, out = _launch(tmp_path, "async_lifetime", {})
    assert out["status"] == "ok"
    v = out["details"]["variants"]["side_stream"]
    assert len(v["unsafe_wrong_elements"]) == len(v["safe_wrong_elements"]) > 0
    if out["supported"]:
        assert any(v["unsafe_wrong_elements"]) and not any(v["safe_wrong_elements"])


@pytest.mark.gpu
def test_optimizer_init_fusedadam_on_cuda(tmp_path):
    ev, out = _launch(tmp_path, "optimizer_init", {"zero_stage": 1, "dtype": "bf16"})
    assert out["details"]["device"].startswith("cuda")
    assert out["details"]["first_step_optimizer_calls"] == 1


@pytest.mark.gpu
def test_reduction_order_nccl(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("NCCL all_reduce needs two GPUs")
    ev, out = _launch(tmp_path, "reduction_order", {"backend": "nccl", "world_size": 2})
    assert out["supported"] is False  # a + b == b + a: two ranks cannot differ by order


@pytest.mark.gpu
def test_gpu_suite_writes_markdown(tmp_path):
    text = run_suite(tmp_path / "ws", 600, only=["op_repeatability"])
    assert text.count("| op_repeatability |") == 14
