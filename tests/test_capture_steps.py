"""Step boundaries come from what the job reports; what runs before the first step is init.

Sources, strongest first: the step function the capture config names, the job's
``MetricLog.log(step, ...)`` calls, the optimizer (or DeepSpeed engine) step. Events
before the first step carry step -1 (INIT_STEP); an optimizer step then is an init event.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from triage_agent.fingerprint import CaptureConfig, Tracer, capture_command
from triage_agent.metrics import MetricLog
from triage_agent.trace_format import INIT_STEP, TraceEvent


def _events(d: Path) -> list[TraceEvent]:
    lines = (d / "trace_rank00000.jsonl").read_text().splitlines()
    return [TraceEvent.model_validate_json(x) for x in lines if json.loads(x)["type"] == "event"]


def _status(d: Path) -> dict:
    return json.loads((d / "capture_rank00000.json").read_text())


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _auto(tmp_path, steps, level="module", **kw):
    cfg = CaptureConfig(out_dir=tmp_path / "t", steps=steps, level=level, **kw)
    return Tracer(cfg, rank=0, world_size=1, auto_steps=True)


def test_optimizer_step_before_training_is_init_not_a_step(tmp_path):
    with _auto(tmp_path, (INIT_STEP, 1)):
        m = _model()
        opt = torch.optim.AdamW(m.parameters(), lr=0.01)
        for p in m.parameters():  # state made before training: the init-time step
            p.grad = torch.zeros_like(p)
        opt.step()
        opt.zero_grad()
        for _ in range(3):
            m(torch.randn(3, 4)).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
    assert _status(tmp_path / "t")["steps_seen"] == [0, 1, 2]
    evs = _events(tmp_path / "t")
    init = [e for e in evs if e.step == INIT_STEP]
    assert {e.kind for e in init} == {"optimizer"} and len(init) == 4
    assert all(e.caller and e.caller.startswith(__file__ + ":") for e in init)
    step0 = [e for e in evs if e.step == 0]
    assert {"module", "optimizer"} <= {e.kind for e in step0}
    # the forward that began step 0 is recorded whole, root included, once
    fwd = [e.scope for e in step0 if e.kind == "module" and e.phase == "forward"]
    assert fwd == ["0", "1", "2", ""]
    assert {e.step for e in evs} == {INIT_STEP, 0, 1}


class _Momentum:
    """A job's own optimizer: not a torch.optim.Optimizer, so no optimizer hook sees it."""

    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr

    @torch.no_grad()
    def step(self):
        for p in self.params:
            p.add_(p.grad, alpha=-self.lr)

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def test_metric_log_steps_a_job_whose_optimizer_torch_does_not_know(tmp_path):
    with _auto(tmp_path, (5, 6), level="op"):
        m = _model()
        opt = _Momentum(m.parameters(), lr=0.1)
        log = MetricLog(tmp_path / "metrics", resumed_from=4)  # a resumed job: steps from 5
        for step in range(5, 9):
            loss = m(torch.randn(3, 4)).pow(2).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            log.log(step, loss=loss.detach())
        log.close()
    st = _status(tmp_path / "t")
    assert st["steps_seen"] == [5, 6, 7, 8] and st["steps_traced"] == [5, 6]
    assert st["resumed_from"] == 4  # its steps are global ones: a replay is no restart
    evs = _events(tmp_path / "t")
    assert {e.step for e in evs} == {5, 6}
    fwd = [e.scope for e in evs if e.step == 5 and e.kind == "module" and e.phase == "forward"]
    assert fwd == ["0", "1", "2", ""]
    assert any(e.name == "aten::add_.Tensor" and e.phase == "other" for e in evs)  # the update
    # the resumed process's first step begins at its MetricLog: the batch it draws before the
    # first forward is the step's, as every later step's is (it begins at the last log)
    draws = [sum(e.name.startswith("aten::randn") for e in evs if e.step == s) for s in (5, 6)]
    assert draws == [1, 1]
    # metric logging reads the loss out (.item()): the job's report, not traced work
    assert not any(e.name == "aten::_local_scalar_dense" for e in evs)


def test_metric_log_counts_one_step_where_two_optimizers_step(tmp_path):
    with _auto(tmp_path, None, level="collective"):
        gen, disc = _model(), _model()
        opts = [torch.optim.SGD(x.parameters(), lr=0.1) for x in (gen, disc)]
        log, evals = MetricLog(tmp_path / "m"), MetricLog(tmp_path / "e")
        for step in range(3):
            for net, opt in zip((gen, disc), opts, strict=True):
                net(torch.randn(2, 4)).sum().backward()
                opt.step()
                opt.zero_grad()
            log.log(step, loss=0.0)
            evals.log(step, acc=1.0)  # a second log of the same step is not a boundary
    assert _status(tmp_path / "t")["steps_seen"] == [0, 1, 2]
    evs = _events(tmp_path / "t")
    assert [sum(e.step == s for e in evs) for s in (0, 1, 2)] == [8, 8, 8]  # 2 x 4 params


_STEPLIB = """
def train_step(model, opt, x):
    for half in x.chunk(2):  # two optimizer steps in one training step
        model(half).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
"""


@pytest.mark.parametrize("imported", ["before", "after"])
def test_declared_step_function_begins_each_step(tmp_path, monkeypatch, imported):
    (tmp_path / "steplib_a.py").write_text(_STEPLIB)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "steplib_a", raising=False)
    if imported == "before":
        import steplib_a  # noqa: F401
    with _auto(tmp_path, (0, 1), level="collective", step_function="steplib_a:train_step"):
        import steplib_a

        m = _model()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            steplib_a.train_step(m, opt, torch.randn(4, 4))
    assert _status(tmp_path / "t")["steps_seen"] == [0, 1, 2]
    evs = _events(tmp_path / "t")
    assert [sum(e.step == s for e in evs) for s in (0, 1)] == [8, 8]
    assert not hasattr(steplib_a.train_step, "__wrapped__")  # unpatched at close


def test_step_function_that_does_not_exist_is_said_and_the_optimizer_steps(tmp_path):
    with _auto(tmp_path, None, level="collective", step_function="json:no_such_step"):
        m = _model()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            m(torch.randn(2, 4)).sum().backward()
            opt.step()
    st = _status(tmp_path / "t")
    assert st["steps_seen"] == [0, 1]
    assert "step function json:no_such_step not found" in st["note"]


_SCRIPT = """
import sys
import torch
from triage_agent.metrics import MetricLog

def train_step(model, opt, x):
    for half in x.chunk(2):
        model(half).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
log = MetricLog(sys.argv[1]) if sys.argv[2] == "metrics" else None
for step in range(3):
    train_step(m, opt, torch.randn(4, 4))
    if log:
        log.log(step, loss=0.0)
"""


@pytest.mark.parametrize("source", ["main_function", "metrics", "optimizer"])
def test_injected_command_takes_its_steps_from_the_declared_source(tmp_path, source):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    fn = "__main__:train_step" if source == "main_function" else None
    cfg = CaptureConfig(out_dir=tmp_path / "t", level="collective", step_function=fn)
    argv = [sys.executable, str(script), str(tmp_path / "m"), source]
    res = capture_command(argv, cfg, timeout_s=120)
    assert res.exit_code == 0, Path(res.stderr_log).read_text()[-2000:]
    # two optimizer steps per training step: only the fallback counts each of them
    assert res.steps_seen == ([0, 1, 2, 3, 4, 5] if source == "optimizer" else [0, 1, 2])
    evs = _events(tmp_path / "t")
    per_step = 4 if source == "optimizer" else 8
    assert all(sum(e.step == s for e in evs) == per_step for s in res.steps_seen)


_DS = """
import os, sys
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
os.environ["MASTER_PORT"] = sys.argv[1]
import deepspeed, torch

deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))

def make_optimizer(params):
    opt = torch.optim.AdamW(params, lr=1e-3)
    for g in opt.param_groups:  # state made before training, inside deepspeed.initialize
        for p in g["params"]:
            p.grad = torch.zeros_like(p)
    opt.step()  # INIT STEP
    opt.zero_grad()
    return opt

cfg = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 0}}
engine, *_ = deepspeed.initialize(
    model=model, model_parameters=model.parameters(), optimizer=make_optimizer, config=cfg
)
g = torch.Generator().manual_seed(0)
for _ in range(3):
    loss = engine(torch.randn(2, 4, generator=g)).pow(2).mean()
    engine.backward(loss)
    engine.step()
torch.distributed.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_optimizer_step_inside_deepspeed_initialize_is_init(tmp_path):
    pytest.importorskip("deepspeed")
    script = tmp_path / "ds_init.py"
    script.write_text(_DS)
    cfg = CaptureConfig(out_dir=tmp_path / "t", steps=(INIT_STEP, 0), level="module")
    res = capture_command([sys.executable, str(script), str(_free_port())], cfg, timeout_s=300)
    assert res.exit_code == 0, Path(res.stderr_log).read_text()[-2000:]
    # not 0, 1, 0, 1, 2: the optimizer step inside initialize is no step
    assert _status(tmp_path / "t")["steps_seen"] == [0, 1, 2]
    assert res.steps_traced == [INIT_STEP, 0]
    evs = _events(tmp_path / "t")
    assert {e.step for e in evs} == {INIT_STEP, 0}
    init_opt = [e for e in evs if e.step == INIT_STEP and e.kind == "optimizer"]
    line = _DS.splitlines().index("    opt.step()  # INIT STEP") + 1
    assert len(init_opt) == 4 and {e.caller for e in init_opt} == {f"{script}:{line}"}
    assert any(e.kind == "module" and e.scope == "0" for e in evs if e.step == 0)


def test_trace_cli_takes_a_step_function_and_an_init_window(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    r = subprocess.run(
        [
            sys.executable, "-m", "triage_agent.cli.app", "trace", "--steps", "init-0",
            "--level", "collective", "--step-function", "__main__:train_step",
            "--out", str(tmp_path / "t"), "--json", "--",
            sys.executable, str(script), str(tmp_path / "m"), "plain",
        ],
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["steps_seen"] == [0, 1, 2] and res["steps_traced"] == [0]
    bad = subprocess.run(
        [
            sys.executable, "-m", "triage_agent.cli.app", "trace", "--step-function",
            "not a name", "--out", str(tmp_path / "u"), "--", sys.executable, "-c", "0",
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "step_function" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_comparator_reads_the_init_phase_and_names_an_init_only_optimizer_step(tmp_path):
    from triage_agent.compare import compare_runs, load_run

    for name in ("a", "b"):
        with _auto(tmp_path / name, (0, 1)):
            m = _model()
            opt = torch.optim.AdamW(m.parameters(), lr=0.01)
            if name == "b":  # B makes optimizer state before training; A does not
                for p in m.parameters():
                    p.grad = torch.zeros_like(p)
                opt.step()
                opt.zero_grad()
            g = torch.Generator().manual_seed(1)
            for _ in range(2):
                m(torch.randn(3, 4, generator=g)).sum().backward()
                opt.step()
                opt.zero_grad()
    r = compare_runs(load_run(tmp_path / "a" / "t"), load_run(tmp_path / "b" / "t")).ranks[0]
    first = r.first_divergence
    assert r.status == "diverged" and first.a is None
    assert (first.b.step, first.b.kind, first.b.scope) == (INIT_STEP, "optimizer", "AdamW")
    assert first.b.caller.startswith(__file__ + ":")
