"""A kernel-choosing policy that made B match A: an execution setting A already runs with
(environment) when A's bits do not move under it, the class of the hypothesis when they do.
And a hypothesis a reproducer supports in isolation that the trace's first divergence does not
bear out is no longer left supported. Real small jobs (plain torch on CPU), built here, unlike
the corpus cases in names and code."""

from __future__ import annotations

import time

from test_ledger_support import add_evidence, supported_hypothesis
from test_workflow_support import flags_case

from triage_agent.compare.result import EventRef
from triage_agent.evidence_data import RerunData
from triage_agent.ledger import Ledger
from triage_agent.records import (
    Case,
    Classification,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
)
from triage_agent.workflow.characterize import characterize
from triage_agent.workflow.engine import _candidates, baselines, decide
from triage_agent.workflow.fixcheck import validate_fix
from triage_agent.workflow.options import RunOptions
from triage_agent.workflow.stage2 import Stage2Result

# Slot pooling whose kernel the job picks by the deterministic-algorithms switch, as
# libraries do: rows summed in token order under it, in a faster order of the launch's choice
# otherwise (another order of the same additions).
POOL = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--strict", action="store_true")
p.add_argument("--fast-order", default="reverse")
a = p.parse_args()
if a.strict:
    torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
torch.manual_seed(4)
enc, head = torch.nn.Linear(6, 8), torch.nn.Linear(8, 1)
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.05)


def pool(h, slot):
    out = torch.zeros(4, h.shape[1])
    if torch.are_deterministic_algorithms_enabled():
        return out.index_add_(0, slot, h)
    n = len(slot)
    order = torch.arange(n - 1, -1, -1) if a.fast_order == "reverse" else torch.arange(n).roll(7)
    return out.index_add_(0, slot[order], h[order])


with MetricLog(a.out, rank=0) as log:
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(64, 6, generator=g)
        slot = torch.randint(0, 4, (64,), generator=g)
        loss = head(pool(torch.tanh(enc(x)), slot)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def _decide_on_policy(case: Case) -> tuple[Ledger, Hypothesis, str]:
    """Baselines, a kernel-order hypothesis proven by the deterministic policy's fix check,
    then the verdict; the ledger, the hypothesis as it ends, and which runs the proof changed."""
    ledger = Ledger(case.workspace)
    ledger.record_case(case)
    ma, mb = baselines(case, ledger, lambda stage, msg: None)
    rep = characterize(case, None, ma, mb)
    assert rep.step is not None, rep.message
    hyp = ledger.put_hypothesis(
        Hypothesis(
            statement="the pooled sum's order depends on the kernel: train.py:25",
            category="nondeterminism",
            classification=Classification.bug,
        )
    )
    proof = validate_fix(case, ledger, "deterministic", [hyp.id], str(ma), timeout_s=120)
    assert proof.result == EvidenceResult.supported, proof.summary
    ledger.update_hypothesis(hyp.id, status=HypothesisStatus.supported, evidence=[proof.id])
    opts = RunOptions(timeout_s=120)
    v = decide(
        case,
        ledger,
        rep,
        [ledger.state().hypotheses[hyp.id]],
        None,
        ma,
        opts,
        lambda stage, msg: None,
        time.monotonic() + 600,
    )
    assert v.hypothesis == hyp.id
    return ledger, ledger.state().hypotheses[hyp.id], proof.data_as(RerunData).applied_to or ""


def test_a_policy_that_gives_b_the_setting_a_runs_with_is_an_environment_difference(tmp_path):
    case = flags_case(tmp_path, "pool-order", {"train.py": POOL}, ["--strict"], [])
    ledger, hyp, applied = _decide_on_policy(case)
    assert applied == "B only"
    v = ledger.state().verdict
    assert v.classification == Classification.environment, v
    assert hyp.category == "execution-setting"
    assert "changes none of A's bits" in hyp.statement
    # the rerun of A that says so is in the verdict's chain, about no hypothesis
    st = ledger.state()
    a_runs = [
        e
        for e in st.evidence
        if e.id in v.evidence and e.kind == EvidenceKind.rerun and e.result.value == "observed"
    ]
    assert len(a_runs) == 1 and a_runs[0].hypotheses == []
    assert a_runs[0].data_as(RerunData).applied_to == "A only"
    # the kernel's site stays the location; the proving rerun is still the hypothesis's own
    assert "train.py:25" in v.statement


def test_a_policy_that_moves_a_too_keeps_the_class_of_the_cause(tmp_path):
    # neither run asks for deterministic kernels: under the policy both change
    case = flags_case(
        tmp_path,
        "pool-order",
        {"train.py": POOL},
        ["--fast-order", "roll"],
        ["--fast-order", "reverse"],
    )
    ledger, hyp, applied = _decide_on_policy(case)
    assert applied == "A and B"
    assert ledger.state().verdict.classification == Classification.bug
    assert hyp.category == "nondeterminism"
    # the fix check already ran the policy on A: no rerun of A alone is added after it
    said = [e.summary for e in ledger.state().evidence if "applied to A alone" in e.summary]
    assert said == []
    reruns = [e for e in ledger.state().evidence if e.kind == EvidenceKind.rerun]
    assert reruns[-1].result == EvidenceResult.supported


def _ref(run: str) -> EventRef:
    return EventRef(
        run=run,
        rank=0,
        index=5,
        seq=5,
        line=6,
        file=f"trace_{run}.jsonl",
        step=1,
        kind="optimizer",
        name="group0.param0",
        scope="Adamish",
        call=0,
        phase="step",
    )


def test_a_hypothesis_supported_in_isolation_that_the_trace_does_not_bear_out_is_not_left_supported(
    tmp_path,
):
    ledger = Ledger(tmp_path / "ws")
    hyp = supported_hypothesis(
        ledger,
        "an atomic scatter elsewhere",
        "nondeterminism",
        summary="the op alone varies run to run",
    )
    trace_ev = add_evidence(ledger, None, EvidenceResult.observed, EvidenceKind.trace_compare, "t")
    trace = Stage2Result(
        step=2,
        window=(1, 2),
        evidence=trace_ev,
        origin=_ref("b"),
        origin_location="rank 0 step 1 optimizer Adamish::group0.param0",
        explains=[],
    )
    assert _candidates(ledger, trace) == []
    assert ledger.state().hypotheses[hyp.id].status == HypothesisStatus.inconclusive
    # once put aside it is no candidate again, and the note says why once
    assert _candidates(ledger, trace) == []
    notes = [n for n in ledger.state().notes if "marked inconclusive" in str(n)]
    assert len(notes) == 1
