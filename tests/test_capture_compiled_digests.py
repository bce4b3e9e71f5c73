"""A model compiled by Inductor, traced at op level with both digests: Dynamo compiles none
of the tracer's own frames (its hooks run in the eager gap of a graph break, its dispatch
mode's handler under a compiled frame: Dynamo would compile either, the digest code into a
kernel of its own), every digest is
the one computed eagerly of the same tensor, and the traced run computes what the untraced
compiled run does, bit for bit."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
import torch._dynamo

from triage_agent.fingerprint import CaptureConfig, Tracer, digest_now

PACKAGE = str(Path(__import__("triage_agent").__file__).parent)


class _Broken(torch.nn.Module):
    """A graph break inside: Dynamo runs this module's call eagerly, in a gap of the
    compiled frame, where its hooks (the tracer's) are frames Dynamo would compile."""

    def __init__(self):
        super().__init__()
        self.lin, self.act = torch.nn.Linear(8, 8), torch.nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        torch._dynamo.graph_break()
        return self.act(h)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(16, 8), _Broken(), torch.nn.Linear(8, 16))


def _train(model: torch.nn.Module, run, tr: Tracer | None = None) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for s in range(2):
        if tr is not None:
            tr.step(s)
        tok = torch.randint(0, 16, (4, 5), generator=g)
        logits = run(tok[:, :-1]).reshape(-1, 16)
        loss = torch.nn.functional.cross_entropy(logits, tok[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


class _Compiled(logging.Handler):
    """The source files of the frames Dynamo starts compiling."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.files: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("torchdynamo start compiling"):
            self.files.append(str(record.args[1]))


def test_no_tracer_frame_is_compiled_and_digests_are_eager(tmp_path):
    torch._dynamo.reset()
    log = logging.getLogger("torch._dynamo.convert_frame")
    seen, level = _Compiled(), log.level
    log.addHandler(seen)
    log.setLevel(logging.DEBUG)
    try:
        bare = _model()
        untraced = _train(bare, torch.compile(bare))
        assert seen.files, "the untraced run's compiled frames are seen"
        # the traced run reuses the model's graphs: what Dynamo compiles now is no model code
        seen.files.clear()
        model = _model()
        cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 1), level="op", digest="both")
        with Tracer(cfg) as tr:
            traced = _train(model, torch.compile(model), tr)
    finally:
        log.removeHandler(seen)
        log.setLevel(level)
    assert not [f for f in seen.files if f.startswith(PACKAGE)]
    assert traced == untraced  # bit for bit: the tracer changed nothing the compiler made
    events = [
        json.loads(x)
        for x in (tmp_path / "trace_rank00000.jsonl").read_text().splitlines()
        if '"event"' in x
    ]
    assert sum(e["kind"] == "op" for e in events) > 20
    # the last step's optimizer events: each parameter after its update, digested eagerly now
    params = dict(model.named_parameters())
    last = [e for e in events if e["kind"] == "optimizer" and e["step"] == 1]
    assert len(last) == len(params)
    for e in last:
        rec = e["outputs"][e["meta"]["tensors"].index("param")]
        eager = digest_now(params[e["name"]], "both")
        assert (rec["digest"], rec["order"]) == (eager["digest"], eager["order"]), e["name"]
