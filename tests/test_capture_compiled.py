"""A model run under torch.compile is traced without breaking it: the tracer's module hooks
stand aside inside the frames Dynamo compiles (the compiled region is one module event, its
inner modules unseen), instead of being traced into the graph, where Dynamo fails on the
tracer's own state and the run dies."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
from test_cli_support import run_cli

from triage_agent.fingerprint import CaptureConfig, Tracer
from triage_agent.metrics import diff_metrics, load_metrics


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _losses(tr: Tracer | None, model: torch.nn.Module, run) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    out = []
    for s in range(3):
        if tr is not None:
            tr.step(s)
        loss = run(torch.randn(4, 6, generator=g)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


def test_a_compiled_model_is_traced_and_computes_as_untraced(tmp_path):
    torch._dynamo.reset()
    bare = _model()
    untraced = _losses(None, bare, torch.compile(bare, backend="eager"))
    torch._dynamo.reset()
    model = _model()
    compiled = torch.compile(model, backend="eager")
    with Tracer(CaptureConfig(out_dir=tmp_path, steps=(0, 2), level="module")) as tr:
        traced = _losses(tr, model, compiled)
    assert traced == untraced
    events = [
        json.loads(x)
        for x in (tmp_path / "trace_rank00000.jsonl").read_text().splitlines()
        if '"event"' in x
    ]
    names = {(e["kind"], e["name"]) for e in events}
    assert ("module", "OptimizedModule") in names
    # the compiled region's own modules run inside the compiled frame: not seen one by one
    assert ("module", "Linear") not in names
    assert any(e["kind"] == "optimizer" for e in events)


# A job whose model unpacks a tensor (q, k, v = ...) under torch.compile, run by a user's
# command line: AOTAutograd traces forward and backward on fake tensors first.
COMPILED_JOB = """import sys
import torch
from triage_agent.metrics import MetricLog

torch.manual_seed(0)


class Mix(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.qkv = torch.nn.Linear(8, 24)
        self.out = torch.nn.Linear(8, 16)

    def forward(self, tok):
        q, k, v = self.qkv(self.embed(tok)).view(4, 4, 3, 8).permute(2, 0, 1, 3)
        return self.out(torch.nn.functional.layer_norm(q * k + v, (8,)))


model = Mix()
run = torch.compile(model, backend="aot_eager")
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(2):
        tok = torch.randint(0, 16, (4, 5), generator=torch.Generator().manual_seed(step))
        loss = torch.nn.functional.cross_entropy(run(tok[:, :-1]).reshape(-1, 16), tok[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.log(step, loss=loss.detach())
"""


def test_an_op_trace_of_a_compiled_job_sees_the_compiled_code_run_not_its_compilation(tmp_path):
    # The injected tracer (the C++ observer where it is built) is suspended while torch.compile
    # compiles: an observer that digested the fake tensors of that tracing killed the process.
    # The dispatch mode lets Dynamo compile: otherwise the traced run ran eager, not compiled.
    (tmp_path / "job.py").write_text(COMPILED_JOB)
    plain = subprocess.run(
        [sys.executable, str(tmp_path / "job.py"), str(tmp_path / "plain")], capture_output=True
    )
    assert plain.returncode == 0, plain.stderr[-2000:]
    out = tmp_path / "trace"
    traced = run_cli(
        "trace", "--steps", "0-1", "--level", "op", "--out", str(out), "--",
        sys.executable, str(tmp_path / "job.py"), str(out / "metrics"),
        timeout=300,
    )  # fmt: skip
    assert traced.returncode == 0, traced.stdout[-2000:] + traced.stderr[-2000:]
    same = diff_metrics(load_metrics(tmp_path / "plain"), load_metrics(out / "metrics"))
    assert same.first_step is None and same.common_steps == [0, 1]
    events = [
        json.loads(x)
        for x in (out / "trace_rank00000.jsonl").read_text().splitlines()
        if '"event"' in x
    ]
    regions = [e for e in events if e["kind"] == "module" and e["meta"].get("compiled")]
    assert [(e["step"], e["name"], e["meta"]["compiled"]) for e in regions] == [
        (0, "OptimizedModule", "Mix"),
        (1, "OptimizedModule", "Mix"),
    ]
    names = {(e["kind"], e["name"]) for e in events}
    assert ("module", "Linear") not in names  # compiled: its modules run inside the region
    ops = [e for e in events if e["kind"] == "op"]
    assert any(e["phase"] == "forward" for e in ops)  # the compiled code's own ops, seen
