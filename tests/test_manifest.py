import json
import random
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import torch

from triage_agent.errors import InputError
from triage_agent.manifest import build_manifest, diff_manifests, load_manifest, save_manifest

DATA = Path(__file__).parent / "data_capture"


def _state():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(4, 3)).sum().backward()
    opt.step()
    return m, opt


def test_manifest_roundtrip_and_equal(tmp_path):
    m, opt = _state()
    a = build_manifest({"model": m.state_dict(), "opt": opt.state_dict()}, data_cursor={"i": 4})
    p = save_manifest(a, tmp_path / "a.json")
    b = load_manifest(p)
    assert diff_manifests(a, b).equal
    assert {"python", "numpy", "torch_cpu"} <= set(a.rng)
    assert "opt.state.0.exp_avg" in a.tensors and a.tensors["model.weight"].bytes == 24
    assert a.scalars["opt.param_groups[0].lr"] == f"float:{(0.001).hex()}"


def test_manifest_sees_one_bit_rng_and_cursor_changes():
    m, opt = _state()
    a = build_manifest(m, data_cursor={"samples": 8})
    with torch.no_grad():
        m.weight.view(torch.int32)[0, 0] ^= 1
    random.random()  # advance the python stream only
    b = build_manifest(m, data_cursor={"samples": 9})
    d = diff_manifests(a, b)
    got = {(e.section, e.path, e.reason) for e in d.differences}
    assert ("tensor", "model.weight", "sha256") in got
    assert ("rng", "python", "value") in got
    assert ("data", "data_cursor", "value") in got
    assert ("rng", "torch_cpu", "value") not in got


def test_manifest_dtype_difference_named():
    a = build_manifest({"w": torch.zeros(2)}, include_rng=False)
    b = build_manifest({"w": torch.zeros(2, dtype=torch.bfloat16)}, include_rng=False)
    (e,) = diff_manifests(a, b).differences
    assert e.reason == "dtype" and (e.a, e.b) == ("float32", "bfloat16")


def test_manifest_bad_input(tmp_path):
    with pytest.raises(InputError, match="cannot build a manifest"):
        build_manifest(42)
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="not a state manifest|cannot read"):
        load_manifest(tmp_path / "missing.json")
    bad.write_text("[1]")
    with pytest.raises(InputError, match="not a state manifest"):
        load_manifest(bad)


def test_manifest_cli_diff_exit_codes(tmp_path):
    a = build_manifest({"w": torch.ones(2)}, include_rng=False)
    b = build_manifest({"w": torch.zeros(2)}, include_rng=False)
    save_manifest(a, tmp_path / "a.json")
    save_manifest(b, tmp_path / "b.json")
    run = ["python", "-m", "triage_agent.cli.app", "manifest", "diff"]
    same = subprocess.run([*run, "a.json", "a.json"], cwd=tmp_path, capture_output=True, text=True)
    assert same.returncode == 0 and "equal" in same.stdout
    diff = subprocess.run(
        [*run, "a.json", "b.json", "--json"], cwd=tmp_path, capture_output=True, text=True
    )
    assert diff.returncode == 1
    assert json.loads(diff.stdout)["differences"][0]["path"] == "w"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("deepspeed") is None, reason="deepspeed launcher not on PATH")
def test_manifest_deepspeed_zero1_and_zero2_before_save_after_load(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    # one launch, two engines per stage would double the cost: run ZeRO 1 and 2 in turn
    for stage in (1, 2):
        r = subprocess.run(
            ["deepspeed", "--num_gpus", "2", "--master_port", port, str(DATA / "ds_train.py"),
             str(tmp_path), str(stage), "3", "manifest"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        for rank in (0, 1):
            before = load_manifest(tmp_path / f"z{stage}_before_rank{rank}.json")
            after = load_manifest(tmp_path / f"z{stage}_after_rank{rank}.json")
            assert before.rank == rank and before.data_cursor == {"samples": 6}
            names = set(before.tensors)
            assert any(n.startswith("model.") for n in names)
            assert any("exp_avg_sq" in n for n in names)  # optimizer moments
            assert any("single_partition_of_fp32_groups" in n for n in names)  # master weights
            assert before.scalars["engine.global_steps"] == "int:3"
            d = diff_manifests(before, after)
            # model, master weights and moments survive the checkpoint bit for bit...
            assert not [e for e in d.differences if e.section == "tensor"], d.differences
            # ...while the script reseeds torch's CPU generator in between, which the
            # manifest must notice (a checkpoint that does not carry an RNG stream shows here)
            assert ("rng", "torch_cpu") in {(e.section, e.path) for e in d.differences}


@pytest.mark.parametrize("doc", ["{}", '{"version": 99}', '{"version": 1, "tensors": 5}'])
def test_a_document_that_is_not_a_manifest_is_refused_with_the_field(tmp_path, doc):
    p = tmp_path / "m.json"
    p.write_text(doc)
    with pytest.raises(InputError, match=r"is not a state manifest: (version|tensors)"):
        load_manifest(p)
