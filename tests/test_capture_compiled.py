"""A model run under torch.compile is traced without breaking it: the tracer's module hooks
stand aside inside the frames Dynamo compiles (the compiled region is one module event, its
inner modules unseen), instead of being traced into the graph, where Dynamo fails on the
tracer's own state and the run dies."""

from __future__ import annotations

import json

import torch

from triage_agent.fingerprint import CaptureConfig, Tracer


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
