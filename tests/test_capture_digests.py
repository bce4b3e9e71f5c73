"""A recorded digest is never stale: writes that do not bump the version counter are seen.

``t.data`` is an alias with its own version counter, and kernels outside the dispatcher
(C++ extensions, numpy views) bump none: a digest reused because the counter did not move
would record the bytes from before the write.
"""

import json

import pytest
import torch

from triage_agent.fingerprint import CaptureConfig, Tracer
from triage_agent.fingerprint.digest import digest_now
from triage_agent.trace_format import TraceEvent


def _events(path):
    return [
        TraceEvent.model_validate(r)
        for r in map(json.loads, (path / "trace_rank00000.jsonl").read_text().splitlines())
        if r["type"] == "event"
    ]


class _Accumulate(torch.nn.Module):
    """Adds its input to a buffer through ``.data`` and returns the buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(8))

    def forward(self, x):
        self.acc.data.add_(x)
        return self.acc


@pytest.mark.parametrize("level", ["module", "op"])
def test_data_write_inside_a_module_changes_its_output_digest(tmp_path, level):
    m = _Accumulate()
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level=level)) as tr:
        tr.step(0)
        out = m(torch.arange(1.0, 9.0))  # distinct values: equal pairs cancel in the xor digest
        tr.end_step()
    ev = next(e for e in _events(tmp_path) if e.kind == "module" and e.name == "_Accumulate")
    own = ev.inputs[-1]  # the buffer, recorded as an input before the forward ran
    assert own.digest == digest_now(torch.zeros(8))["digest"]
    assert ev.outputs[0].digest == digest_now(out)["digest"] != own.digest


class _DataSGD(torch.optim.Optimizer):
    """A real torch optimizer that updates its parameters the old way, through ``.data``."""

    def __init__(self, params, lr, foreach):
        super().__init__(params, {"lr": lr})
        self.foreach = foreach

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            ps = [p for p in group["params"] if p.grad is not None]
            if self.foreach:
                torch._foreach_add_([p.data for p in ps], [p.grad for p in ps], alpha=-group["lr"])
            else:
                for p in ps:
                    p.data.add_(p.grad, alpha=-group["lr"])


@pytest.mark.parametrize("foreach", [False, True], ids=["data_add", "foreach_on_data"])
@pytest.mark.parametrize("level", ["collective", "module", "op"])
def test_optimizer_step_through_data_changes_the_parameter_digest(tmp_path, level, foreach):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    opt = _DataSGD(m.parameters(), lr=0.5, foreach=foreach)
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level=level)) as tr:
        tr.step(0)
        m(torch.randn(3, 4)).sum().backward()
        before = {n: digest_now(p)["digest"] for n, p in m.named_parameters()}
        opt.step()
        tr.end_step()
    evs = [e for e in _events(tmp_path) if e.kind == "optimizer"]
    assert len(evs) == 2  # one per parameter, in the group's order
    for ev, (name, p) in zip(evs, m.named_parameters(), strict=True):
        assert ev.meta["tensors"][0] == "param"
        assert ev.inputs[0].digest == before[name]
        assert ev.outputs[0].digest == digest_now(p)["digest"] != before[name]


@pytest.mark.parametrize("fill", ["numpy", "data_slice"])
def test_empty_buffer_written_outside_the_dispatcher_is_not_uninitialized(tmp_path, fill):
    src = torch.arange(16, dtype=torch.float32)
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")) as tr:
        tr.step(0)
        buf = torch.empty(16)
        if fill == "numpy":
            buf.numpy()[:] = src.numpy()  # no ATen op: a C++ kernel's write looks like this
        else:
            buf.data[1:].copy_(src[1:])  # an alias of another address and version counter
            buf.numpy()[0] = 0.0
        torch.neg(buf)
        tr.end_step()
    evs = {e.name: e for e in _events(tmp_path)}
    assert evs["aten::empty.memory_format"].outputs[0].digest == "uninitialized"
    assert evs["aten::neg"].inputs[0].digest == digest_now(src)["digest"]


def test_two_runs_filling_an_empty_buffer_differently_differ(tmp_path):
    digests = []
    for run, value in (("a", 1.0), ("b", 2.0)):
        with Tracer(CaptureConfig(out_dir=tmp_path / run, steps=(0, 0), level="op")) as tr:
            tr.step(0)
            buf = torch.empty(8)
            buf.numpy()[:] = (torch.arange(8.0) + value).numpy()
            buf.sum()
            tr.end_step()
        ev = next(e for e in _events(tmp_path / run) if e.name == "aten::sum")
        digests.append(ev.inputs[0].digest)
    assert "uninitialized" not in digests and digests[0] != digests[1]


def test_buffer_nothing_wrote_is_still_uninitialized_where_it_is_overwritten(tmp_path):
    # dropout: empty_like, then bernoulli_ overwrites it; its old bytes are noise, not input
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")) as tr:
        tr.step(0)
        buf = torch.empty(8)
        buf.data.view(2, 4)  # a view of the alias: no write
        buf.bernoulli_(0.5)
        tr.end_step()
    bern = next(e for e in _events(tmp_path) if e.name.startswith("aten::bernoulli_"))
    assert bern.inputs[0].digest == "uninitialized"
    assert bern.outputs[0].digest not in ("uninitialized", "none")
