"""What a trace records besides digests: versions, dumps at every level, call sites."""

import importlib.metadata
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from triage_agent.fingerprint import CaptureConfig, Tracer, capture_command
from triage_agent.trace_format import TraceEvent


def _events(d: Path) -> list[TraceEvent]:
    lines = (d / "trace_rank00000.jsonl").read_text().splitlines()
    return [TraceEvent.model_validate_json(x) for x in lines if json.loads(x)["type"] == "event"]


def _load(d: Path, ev: TraceEvent) -> dict:
    assert ev.dump, f"{ev.kind} {ev.name} has no dump"
    return torch.load(d / ev.dump, weights_only=True)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and torch.equal(a.view(torch.int32), b.view(torch.int32))
    )


def test_module_dump_holds_its_inputs_and_its_own_weights(tmp_path):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="module", dump=["2:Linear"])
    with Tracer(cfg) as tr:
        tr.step(0)
        hidden = m[1](m[0](x)).detach().clone()
        weight = m[2].weight.detach().clone()
        out = m(x)
        tr.end_step()
    ev = next(e for e in _events(tmp_path) if e.scope == "2" and e.phase == "forward")
    rec = _load(tmp_path, ev)
    assert rec["input_names"] == ["input0", "weight", "bias"]
    assert len(rec["inputs"]) == len(ev.inputs) == 3  # one copy per input digest, same order
    assert _bits_equal(rec["inputs"][0], hidden) and _bits_equal(rec["inputs"][1], weight)
    assert _bits_equal(rec["outputs"][0], out.detach())


def test_optimizer_dump_holds_the_state_before_and_after(tmp_path):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
    cfg = CaptureConfig(out_dir=tmp_path, steps=(1, 1), level="collective", dump=["*param0"])
    with Tracer(cfg) as tr:
        for s in range(2):
            tr.step(s)
            m(torch.randn(3, 4)).sum().backward()
            before = m.weight.detach().clone()
            opt.step()
            opt.zero_grad()
        tr.end_step()
    evs = [e for e in _events(tmp_path) if e.kind == "optimizer"]
    assert [e.name for e in evs] == ["group0.param0", "group0.param1"]
    assert evs[1].dump is None  # only what the pattern names
    rec = _load(tmp_path, evs[0])
    assert rec["input_names"] == ["param", "grad", "momentum_buffer"] == rec["output_names"]
    assert _bits_equal(rec["inputs"][0], before)
    assert _bits_equal(rec["outputs"][0], m.weight.detach())
    assert not _bits_equal(rec["inputs"][2], rec["outputs"][2])  # the momentum moved


def test_collective_dump_holds_what_was_sent_and_received(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        cfg = CaptureConfig(
            out_dir=tmp_path / "t", steps=(0, 0), level="collective", dump=["all_reduce"]
        )
        t = torch.arange(4.0)
        with Tracer(cfg) as tr:
            tr.step(0)
            h = dist.all_reduce(t, async_op=True)
            t.mul_(3)  # written after launch: the received copy is taken at wait()
            h.wait()
            tr.end_step()
    finally:
        dist.destroy_process_group()
    (ev,) = _events(tmp_path / "t")
    rec = _load(tmp_path / "t", ev)
    assert _bits_equal(rec["inputs"][0], torch.arange(4.0))
    assert _bits_equal(rec["outputs"][0], torch.arange(4.0) * 3)


def test_in_place_update_carries_its_call_site(tmp_path):
    x = torch.randn(4)
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")) as tr:
        tr.step(0)
        y = x * 2
        y.add_(1)  # the line recorded
        tr.end_step()
    line = Path(__file__).read_text().splitlines().index("        y.add_(1)  # the line recorded")
    evs = {e.name: e for e in _events(tmp_path)}
    assert evs["aten::add_.Tensor"].caller == f"{__file__}:{line + 1}"
    assert evs["aten::mul.Tensor"].caller is None  # a pure op: no frame walk


_JOB = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
torch.manual_seed(0)
m = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(2):
    m(torch.randn(3, 4)).sum().backward()
    for p in m.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""


def test_injected_trace_records_deepspeed_version_and_collective_level_dumps(tmp_path):
    try:
        want = importlib.metadata.version("deepspeed")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("deepspeed is not installed")
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    cfg = CaptureConfig(
        out_dir=tmp_path / "t", steps=(1, 1), level="collective", dump=["all_reduce"]
    )
    res = capture_command(
        [sys.executable, str(script), str(tmp_path / "store")], cfg, timeout_s=120
    )
    assert res.exit_code == 0, Path(res.stderr_log).read_text()[-2000:]
    assert not any("--dump" in w for w in res.warnings), res.warnings
    header = json.loads((tmp_path / "t" / "trace_rank00000.jsonl").read_text().splitlines()[0])
    assert header["versions"]["deepspeed"] == want
    colls = [e for e in _events(tmp_path / "t") if e.kind == "collective"]
    assert len(colls) == 2 and all(e.dump and e.caller.startswith(str(script)) for e in colls)
    assert len(list((tmp_path / "t" / "dumps" / "rank00000").glob("*.pt"))) == 2
