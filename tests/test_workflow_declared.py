"""Declared differences (environment variables, launch flags, JSON config keys) become
hypotheses, each tested by one intervention on B; supported only when every step matches.
Real small jobs (plain torch on CPU), built here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_workflow_support import triage

from triage_agent.ledger_view import discriminator_rows, to_markdown, verdict_basis
from triage_agent.records import Case, EvidenceKind, RunSpec
from triage_agent.workflow.declared import declared_differences, positional_differences

# A reduction over 2**20 values: PyTorch sums it in one partial per thread, so the data mean
# rounds differently under one and two intra-op threads.
THREADS = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--tag", default="x")
p.add_argument("--accumulate", default="forward")
p.add_argument("--data-dtype", default="float32")
a = p.parse_args()
torch.manual_seed(0)
x = torch.randn(1 << 20).to(getattr(torch, a.data_dtype)).float()
model = torch.nn.Linear(1024, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        mu = x.mean()
        z = ((x - mu) / x.std()).view(1024, 1024)
        parts = [model(c).pow(2).mean() for c in z.split(256)]
        if a.accumulate == "reversed":
            parts = parts[::-1]
        loss = sum(parts) / len(parts)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach(), data_mean=mu)
"""


def _case(tmp_path: Path, env_a: dict, env_b: dict, args_a: list, args_b: list) -> Case:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text(THREADS)

    def run(name, env, args):
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(src),
            env=env,
            launch=[["{python}", "train.py", "--out", "{out}", *args]],
        )

    return Case(
        name="declared",
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a", env_a, args_a),
        run_b=run("b", env_b, args_b),
        timeout_s=120,
    )


def test_flags_and_config_keys_are_read_from_the_launch(tmp_path):
    for name, stage in (("a.json", 1), ("b.json", 2)):
        (tmp_path / name).write_text(json.dumps({"zero_optimization": {"stage": stage}}))

    def run(name, args):
        return RunSpec(name=name, cwd=str(tmp_path), launch=[["python", "t.py", *args]])

    case = Case(
        run_a=run("a", ["--deepspeed_config", "a.json", "--lr=0.1", "--order", "x"]),
        run_b=run("b", ["--deepspeed_config", "b.json", "--lr=0.2", "--order", "x", "--fast"]),
    )
    got = {(d.kind, d.key): d.intervention for d in declared_differences(case)}
    assert got == {
        ("config-key", "zero_optimization.stage"): "config zero_optimization.stage=1",
        ("flag", "--lr"): "config --lr=0.1",
        ("flag", "--fast"): "drop --fast",  # only B has it: dropped from B
    }
    # another script is another job, not a setting: nothing is compared flag by flag
    other = case.model_copy(deep=True)
    other.run_b.launch[0][1] = "u.py"
    assert declared_differences(other) == []


def test_positional_arguments_are_reported_never_proposed(tmp_path):
    def run(name, *launch):
        return RunSpec(name=name, cwd=str(tmp_path), launch=[list(c) for c in launch])

    a = run("a", ["python", "t.py", "--out", "{out}"])
    b = run("b", ["python", "u.py", "resume", "--out", "{out}"])
    got = [(d.key, d.a, d.b, d.a_has, d.b_has) for d in positional_differences(a, b)]
    assert got == [
        ("argument 2", "t.py", "u.py", True, True),
        ("argument 3", None, "resume", False, True),
    ]
    assert all(d.tests() == [] for d in positional_differences(a, b))
    assert declared_differences(Case(run_a=a, run_b=b)) == []  # nothing for the loop to test
    two = run("b", ["python", "t.py", "--out", "{out}"], ["python", "u.py"])
    (n,) = positional_differences(a, two)
    assert n.said() == "the runs launch a different number of commands (A: 1, B: 2)"
    # one command each, the second argument of the second one differing
    pair = run("a", ["python", "t.py"], ["python", "v.py"])
    (d,) = positional_differences(pair, two)
    assert d.key == "argument 2 of command 2" and (d.a, d.b) == ("v.py", "u.py")
    # a run given as metric files declares no command, hence no difference
    assert positional_differences(a, RunSpec(name="b", metrics="runs/b")) == []


def test_an_environment_difference_is_proven_by_aligning_it_on_b(tmp_path):
    case = _case(
        tmp_path,
        {"OMP_NUM_THREADS": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        {"OMP_NUM_THREADS": "2", "CUBLAS_WORKSPACE_CONFIG": ":16:8"},
        ["--tag", "a"],
        ["--tag", "b"],
    )
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 0
    assert v.classification.value == "environment", v
    # the state capture saw the mechanism (one intra-op thread against two) and proved it
    # first; the declared variables, tested to read the proof back, name the one that set it
    assert "torch.num_threads" in st.hypotheses[v.hypothesis].statement
    assert "setting:torch.num_threads" in (v.location or "")
    assert "set by env:OMP_NUM_THREADS" in v.location
    rows = discriminator_rows(st)
    assert [r.changed for r in rows] == [
        "setting torch.num_threads = 1",
        "set CUBLAS_WORKSPACE_CONFIG=:4096:8",
        "set OMP_NUM_THREADS=1",
    ]
    assert rows[0].outcome == "all 4 steps match" and rows[0].applied_to == "b"
    assert rows[1].outcome == "first differs at step 0" and rows[1].result == "refuted"
    assert rows[2].outcome == "all 4 steps match" and rows[2].applied_to == "b"
    basis = verdict_basis(st)
    assert basis.kind == "intervention" and "setting torch.num_threads = 1" in basis.text
    # an intervention that made every step match is proof: no trace was needed
    assert not [e for e in st.evidence if e.kind == EvidenceKind.trace_compare]
    md = to_markdown(st)
    assert "## Interventions (discriminator table)" in md and "| all 4 steps match |" in md
    shown = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "ledger", "show", "-w", case.workspace],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "250", "PATH": str(Path(sys.executable).parent)},
    )
    assert shown.returncode == 0, shown.stderr
    assert "set OMP_NUM_THREADS=1" in shown.stdout and "all 4 steps match" in shown.stdout
    assert "torch.num_threads" in shown.stdout
    assert "validated by an intervention" in shown.stdout


def test_a_launch_flag_is_tried_when_nothing_more_specific_is_proven(tmp_path):
    case = _case(
        tmp_path,
        {"OMP_NUM_THREADS": "1"},
        {"OMP_NUM_THREADS": "1"},
        ["--accumulate", "forward"],
        ["--accumulate", "reversed"],
    )
    result, st = triage(case)
    v = result.verdict
    # proven to carry the difference, then read from the op trace: the same four parts
    # summed in another order, the metrics a few ulps apart, a numerical policy
    assert v.classification.value == "policy-difference", v
    assert v.hypothesis is not None and "config:--accumulate" in (v.location or "")
    hyp = st.hypotheses[v.hypothesis]
    assert hyp.category == "config-policy"
    assert "reorders or regroups the same arithmetic" in hyp.statement
    rows = discriminator_rows(st)
    assert rows[-1].changed == "launch flag --accumulate=forward"
    assert rows[-1].outcome == "all 4 steps match"
    assert verdict_basis(st).kind == "intervention"


def test_a_setting_whose_values_are_two_precisions_is_a_policy_difference(tmp_path):
    case = _case(
        tmp_path,
        {"OMP_NUM_THREADS": "1"},
        {"OMP_NUM_THREADS": "1"},
        ["--data-dtype", "float32"],
        ["--data-dtype", "bfloat16"],
    )
    (d,) = declared_differences(case)
    assert d.precision and d.intervention == "config --data-dtype=float32"
    result, st = triage(case)
    v = result.verdict
    assert v.classification.value == "policy-difference", v
    assert "config:--data-dtype" in (v.location or "")
    assert verdict_basis(st).kind == "intervention"
    # values that are no precisions say nothing about intent
    other = case.model_copy(deep=True)
    other.run_b.launch[0][-1] = "fast"
    assert not declared_differences(other)[0].precision
