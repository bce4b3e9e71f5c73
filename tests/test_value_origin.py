"""The job's own functions' small values, recorded in real processes and paired across runs:
which function first makes another number from the same numbers, and at which line.

Each job is a real process: a schedule whose factor is worked out in a tensor of a dtype the
launch chooses, and a training loop that hands the factor to an optimizer. Nothing is
patched: the recorder is injected through the launch's patch file, as the workflow does.
"""

from __future__ import annotations

from pathlib import Path

from triage_agent.call_values import numeric, small
from triage_agent.job_frames import JobFiles
from triage_agent.ledger import Ledger
from triage_agent.records import Case, RunSpec
from triage_agent.runs import LaunchChanges, materialize_both
from triage_agent.workflow.hunk_sites import hunk_lines
from triage_agent.workflow.value_origin import _reports, find_origin, find_write, said, value_origin

SCHEDULE = """
import torch


def make_factor(dtype, warmup):
    def factor(step):
        s = torch.tensor(step, dtype=dtype)
        if step < warmup:
            return ((s + 1) / warmup).item()
        return (0.5 * (1 + torch.cos(s / 7))).item()

    return factor
"""

JOB = """
import sys
import torch
from triage_agent.metrics import MetricLog
from schedule import make_factor

out, dtype, base = sys.argv[1], getattr(torch, sys.argv[2]), float(sys.argv[3])
factor = make_factor(dtype, 2)


def scaled(step):
    return base * factor(step)


w = torch.ones(4)
with MetricLog(out, rank=0) as log:
    for step in range(6):
        lr = scaled(step)
        w.mul_(1 - lr)
        log.log(step, w=w.sum())
"""


def _case(tmp_path: Path, b_dtype: str, b_base: str = "0.1") -> Case:
    (tmp_path / "schedule.py").write_text(SCHEDULE)
    (tmp_path / "train.py").write_text(JOB)

    def spec(name: str, dtype: str, base: str) -> RunSpec:
        launch = [["{python}", "train.py", "{out}", dtype, base]]
        return RunSpec(name=name, metrics="{out}", launch=launch, cwd=str(tmp_path))

    return Case(
        run_a=spec("a", "float32", "0.1"),
        run_b=spec("b", b_dtype, b_base),
        workspace=str(tmp_path / "ws"),
        timeout_s=60,
    )


def _recorded(case: Case, tmp_path: Path):
    a, b = materialize_both(
        case, tmp_path / "ws", "values", timeout_s=60, changes=LaunchChanges(values=True)
    )
    assert a.ok and b.ok, (a.error, b.error)
    return _reports(a.out_dir)[0], _reports(b.out_dir)[0]


def test_a_number_handed_in_that_differs_is_received_not_made(tmp_path):
    # B's base rate is another number: every function that computes with it receives the
    # difference; none makes another number from the same numbers
    case = _case(tmp_path, "float32", "0.2")
    calls_a, calls_b = _recorded(case, tmp_path)
    scaled = [c for c in calls_b if c["fn"].endswith(":scaled")]
    assert scaled and scaled[0]["in"]["global base"] == small(0.2)
    assert find_origin(calls_a, calls_b, cwd_a=case.run_a.cwd, cwd_b=case.run_b.cwd) is None


def test_the_function_that_turns_a_dtype_into_another_number_noted_once_and_read_back(
    tmp_path,
):
    case = _case(tmp_path, "bfloat16")
    ledger = Ledger(case.workspace)
    o = value_origin(case, ledger, timeout_s=60)
    assert o is not None
    # the warm-up factors are exact in bfloat16: the first other number is the cosine's
    assert (o.function, o.file, o.call) == ("make_factor.<locals>.factor", "schedule.py", 2)
    assert o.line == 7 and set(o.line_locals) == {"s"}  # the tensor made in the chosen dtype
    assert o.choices["dtype"] == ("s:torch.float32", "s:torch.bfloat16")
    assert o.ret_a != o.ret_b and numeric(o.ret_a)
    text = said(o, case.run_b.cwd)
    assert "schedule.py:7 (s = torch.tensor(step, dtype=dtype)" in text
    assert "bfloat16" in text and "call 2" in text
    # scaled() receives the other number from factor: a receiver, never the origin
    assert "scaled" not in text
    notes = [n for n in ledger.state().notes if "values_read" in n]
    assert len(notes) == 1 and text in notes[0]["text"]
    # a resumed workflow reads the note back and launches nothing
    again = value_origin(case, Ledger(case.workspace), timeout_s=60)
    assert again == o and len(list((tmp_path / "ws" / "runs" / "a").glob("values-*"))) == 1


def test_small_values_carry_their_type_and_frozen_code_is_not_the_jobs():
    import torch

    assert small(0.5) == "f:0x1.0000000000000p-1" and small(3) == "i:3"
    assert small(torch.tensor(5.0)) != small(torch.tensor(5.0, dtype=torch.bfloat16))
    assert small(torch.ones(17)) is None and small([1, 2.0]) == "l:(i:1;f:0x1.0000000000000p+1)"
    assert small(torch.float16) == "s:torch.float16" and not numeric("s:torch.float16")
    job = JobFiles()
    assert not job("<frozen importlib._bootstrap>") and not job("<string>")


SCALER_V1 = """class Scaler:
    def __init__(self, counts):
        total = sum(counts)
        self.weights = [total / c for c in counts]
        self.n = len(counts)
"""

SCALER_V2 = """class Scaler:
    def __init__(self, counts):
        self.n = len(counts)
        self._setup(counts)

    def _setup(self, counts):
        self.weights = [self.n / c for c in counts]
"""

SCALER_JOB = """import sys
from triage_agent.metrics import MetricLog
from scaler import Scaler

s = Scaler([2, 3, 5])
with MetricLog(sys.argv[1], rank=0) as log:
    log.log(0, w=float(sum(s.weights)))
"""


def test_two_versions_pair_their_writes_by_what_they_write_not_where(tmp_path):
    for tree, text in (("v1", SCALER_V1), ("v2", SCALER_V2)):
        (tmp_path / tree).mkdir()
        (tmp_path / tree / "scaler.py").write_text(text)
    (tmp_path / "train.py").write_text(SCALER_JOB)

    def spec(name: str, tree: str) -> RunSpec:
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(tmp_path),
            env={"PYTHONPATH": tree},
            launch=[["{python}", "train.py", "{out}"]],
        )

    case = Case(
        run_a=spec("a", "v1"), run_b=spec("b", "v2"), workspace=str(tmp_path / "ws"), timeout_s=60
    )
    calls_a, calls_b = _recorded(case, tmp_path)
    w = find_write(calls_a, calls_b, cwd_a=str(tmp_path), cwd_b=str(tmp_path))
    assert w is not None and (w.cls, w.attr, w.count) == ("Scaler", "weights", 0)
    # self.n is written alike (3 in both) at other lines: not a difference
    assert (w.site_a, w.site_b) == ("v1/scaler.py:4", "v2/scaler.py:7")
    assert "Scaler.weights" in w.said() and "v1/scaler.py:4" in w.said()
    # a write outside the lines asked about is not named
    assert (
        find_write(
            calls_a, calls_b, cwd_a=str(tmp_path), cwd_b=str(tmp_path), within=lambda f, n: n != 7
        )
        is None
    )


def test_hunk_lines_are_the_lines_each_hunk_gives_b():
    diff = (
        "diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
        "@@ -24,5 +27,3 @@ class X:\n-a\n+b\n+c\n+d\n@@ -40 +45 @@\n-e\n+f\n"
    )
    assert hunk_lines([diff]) == {"pkg/m.py": {27, 28, 29, 45}}
