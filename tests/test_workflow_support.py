"""Shared builders for the workflow tests (no tests here): a case of two runs of one small
script, relaunched by the workflow."""

from __future__ import annotations

from pathlib import Path

from triage_agent.compare.result import Candidate, EventRef
from triage_agent.ledger import Ledger, LedgerState
from triage_agent.records import Case, RunSpec, Verdict
from triage_agent.workflow.engine import WorkflowResult, run_workflow
from triage_agent.workflow.options import RunOptions


def linear_train(steps: int, nudge: str) -> str:
    """A one-layer SGD job that logs its loss bits to ``sys.argv[1]`` for ``steps`` steps and
    runs the statement ``nudge`` (at the indentation of the step's body) first in each step."""
    return f"""import sys
import torch
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range({steps}):
        {nudge}
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def script_case(tmp_path: Path, name: str, b_flag: str, files: dict[str, str]) -> Case:
    """Runs A and B of ``train.py`` (with its helper ``files``) in ``tmp_path/src``; B gets
    ``b_flag``. Each writes its metrics to the output directory the workflow gives it."""
    src = tmp_path / "src"
    src.mkdir()
    for file, text in files.items():
        (src / file).write_text(text)

    def run(run_name: str, *extra: str) -> RunSpec:
        launch = [["{python}", "train.py", "{out}", *extra]]
        return RunSpec(name=run_name, metrics="{out}", cwd=str(src), launch=launch)

    return Case(
        name=name,
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a"),
        run_b=run("b", b_flag),
        timeout_s=120,
    )


def flags_case(
    tmp_path: Path, name: str, files: dict[str, str], a: list[str], b: list[str]
) -> Case:
    """Runs A and B of ``train.py`` (with its helper ``files``) in ``tmp_path/src`` on one
    thread, A with the arguments ``a`` and B with ``b``; each writes its metrics to the
    directory given as ``--out``."""
    src = tmp_path / "src"
    src.mkdir()
    for file, text in files.items():
        (src / file).write_text(text)

    def run(run_name: str, flags: list[str]) -> RunSpec:
        return RunSpec(
            name=run_name,
            metrics="{out}",
            cwd=str(src),
            env={"OMP_NUM_THREADS": "1"},
            launch=[["{python}", "train.py", "--out", "{out}", *flags]],
        )

    return Case(
        name=name,
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a", a),
        run_b=run("b", b),
        timeout_s=120,
    )


def mode_job(imports: str, flag: str, default: str, body: str) -> str:
    """The text of a job for :func:`mode_verdict`: after ``imports`` (whole lines) it parses
    the argv mode_verdict gives (the output directory, then ``flag`` and a mode, ``default``
    when absent) into ``args``, seeds torch with 0 and runs ``body``."""
    return f"""import argparse

import torch
{imports}

from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("{flag}", default="{default}")
args = p.parse_args()
torch.manual_seed(0)
{body}"""


def mode_verdict(
    tmp_path: Path, name: str, files: dict[str, str], flag: str, a: str, b: str
) -> tuple[Verdict | None, Ledger]:
    """The workflow's verdict on ``train.py`` (with its helper ``files``, in ``tmp_path``) run
    with ``flag a`` as A and ``flag b`` as B, five minutes at most, and the ledger it left."""
    for file, text in files.items():
        (tmp_path / file).write_text(text)
    cmd = ["{python}", "train.py", "{out}", flag]
    spec = {"metrics": "{out}", "cwd": str(tmp_path)}
    case = Case(
        name=name,
        workspace=str(tmp_path / "ws"),
        run_a=RunSpec(name="a", launch=[[*cmd, a]], **spec),
        run_b=RunSpec(name="b", launch=[[*cmd, b]], **spec),
        timeout_s=120,
    )
    ledger = Ledger(case.workspace)
    return run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=5)).verdict, ledger


def triage(case: Case) -> tuple[WorkflowResult, LedgerState]:
    """The whole workflow on ``case`` (ten minutes at most, two per launch); its result and
    the ledger it left."""
    ledger = Ledger(case.workspace)
    result = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=10))
    return result, ledger.state()


def extra_call(
    call_site: str, *, step: int, event: str, event_kind: str, phase: str, order: float
) -> Candidate:
    """An event only run B executes, that writes state, made at ``call_site``."""
    return Candidate(
        kind="extra",
        run="b",
        rank=0,
        step=step,
        event=event,
        event_kind=event_kind,
        phase=phase,
        call_site=call_site,
        writes_state=True,
        order=order,
    )


def event_ref(
    name: str, *, scope: str, step: int, index: int, line: int, **fields: object
) -> EventRef:
    """A forward op of run B's rank 0 as a trace names it: event ``index``, at ``line`` of
    its rank file."""
    return EventRef.model_validate(
        {
            "run": "b",
            "rank": 0,
            "index": index,
            "seq": index,
            "line": line,
            "file": "trace_rank00000.jsonl",
            "step": step,
            "kind": "op",
            "name": name,
            "scope": scope,
            "call": 0,
            "phase": "forward",
            **fields,
        }
    )


def resume_job(
    batch: str, data: str, *, imports: str = "", state: str = "", on_resume: str = ""
) -> str:
    """The text of a job for :func:`resume_case`: a linear model under SGD, trained on the
    expression ``batch`` (``data``, a statement, sets up what it reads), checkpointed with
    its optimizer and step, and with the object ``state`` names (its state_dict under that
    name); ``imports`` and ``on_resume`` (run right after a load) are whole lines."""
    more = f"\n{imports}" if imports else ""
    load = f'    {state}.load_state_dict(ck["{state}"])\n' if state else ""
    saved = f'"{state}": {state}.state_dict(), ' if state else ""
    after = f"    {on_resume}\n" if on_resume else ""
    return f"""import sys

import torch{more}

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(1)
net = torch.nn.Linear(6, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
{data}
step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
{load}    resumed = ck["step"]
    step = resumed + 1
{after}log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = net({batch}).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    step += 1
log.close()
if save != "-":
    torch.save({{"net": net.state_dict(), "opt": opt.state_dict(), {saved}"step": last}}, save)
"""


def resume_case(tmp: Path, name: str, steps: int, save_at: int, **fields) -> Case:
    """A job (tmp/train.py, argv: out steps save load) run straight through as A, and as B
    saved at ``save_at`` then resumed from that checkpoint in a new process."""
    cmd = ["{python}", "train.py", "{out}"]
    return Case(
        name=name,
        workspace=str(tmp / "ws"),
        run_a=RunSpec(
            name="a", metrics="{out}", cwd=str(tmp), launch=[[*cmd, str(steps), "-", "-"]]
        ),
        run_b=RunSpec(
            name="b",
            metrics="{out}",
            cwd=str(tmp),
            launch=[
                [*cmd, str(save_at), "{out}/ck.pt", "-"],
                [*cmd, str(steps), "-", "{out}/ck.pt"],
            ],
        ),
        timeout_s=120,
        **fields,
    )
