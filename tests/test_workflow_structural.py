"""An event one run executes and the other does not becomes "this extra call changes state",
tested by suppressing the function it came from in that run. A real small job: run B primes
its AdamW with one zero-gradient step during initialisation (the init-time optimizer step
class), from a helper module; nothing in the workflow knows that."""

from __future__ import annotations

from pathlib import Path

from test_workflow_support import extra_call, script_case, triage

from triage_agent.ledger_view import discriminator_rows, verdict_basis
from triage_agent.records import Case
from triage_agent.workflow.structural import call_site, extra_call_arms, with_patch_targets

HELPERS = '''"""Optimizer set-up helpers."""

import torch


def prime(opt):
    """Build the optimizer state up front (a zero gradient for every parameter, one step)."""
    for group in opt.param_groups:
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
'''

TRAIN = """import sys
import torch
from helpers import prime
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
if "--prime" in sys.argv:
    prime(opt)
x = torch.randn(16, 4)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def _case(tmp_path: Path) -> Case:
    return script_case(
        tmp_path, "extra-call", "--prime", {"train.py": TRAIN, "helpers.py": HELPERS}
    )


def test_a_call_site_names_the_function_around_it(tmp_path):
    case = _case(tmp_path)
    src = Path(case.run_b.cwd)
    site = call_site(f"{src / 'helpers.py'}:11", str(src))
    assert site.target == "helpers:prime"
    # module level and the script itself name nothing a patch can reach
    assert call_site(f"{src / 'helpers.py'}:3", str(src)).target is None
    script = extra_call(
        f"{src / 'train.py'}:10",
        step=-1,
        event="AdamW::0.weight",
        event_kind="optimizer",
        phase="optimizer",
        order=0.5,
    )
    arms, said = extra_call_arms(case, [script])
    assert arms == [] and "no patch can reach" in said[0]


def test_candidates_name_the_function_an_intervention_takes(tmp_path):
    case = _case(tmp_path)
    src = Path(case.run_b.cwd)
    kw = {"step": 0, "event": "AdamW::0.weight", "event_kind": "optimizer", "phase": "optimizer"}
    helper = extra_call(f"{src / 'helpers.py'}:11", order=0.5, **kw)
    script = extra_call(f"{src / 'train.py'}:10", order=1.5, **kw)
    module_level = extra_call(f"{src / 'helpers.py'}:3", order=2.5, **kw)
    missing = helper.model_copy(update={"kind": "missing", "run": "a"})
    got = with_patch_targets(case, [helper, script, module_level, missing])
    # a helper module's function by the name its run imports it under; the launched script
    # runs as __main__ and module level is no function: neither names a patch target
    assert [c.function for c in got] == ["helpers:prime", None, None, "helpers:prime"]
    assert with_patch_targets(None, [helper])[0].function is None


def test_an_extra_init_step_is_proven_by_suppressing_it_on_b(tmp_path):
    case = _case(tmp_path)
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 0
    assert v.classification.value == "bug", v
    hyp = st.hypotheses[v.hypothesis]
    assert hyp.category == "extra-call" and "helpers:prime" in hyp.statement
    assert "helpers.py:11 (prime)" in (v.location or "")
    rows = discriminator_rows(st)
    proof = next(r for r in rows if r.arm == hyp.id)
    assert proof.changed == "helpers:prime suppressed before the first step (returns None)"
    assert proof.applied_to == "b" and proof.outcome == "all 4 steps match"
    assert verdict_basis(st).kind == "intervention"


REDUCERS = """import torch


class Reducer:
    def reduce_into(self, p):
        p.main_grad.add_(p.grad)


class BucketReducer(Reducer):
    def __init__(self):
        self.buckets = {}

    def reduce_into(self, p):
        bucket = self.buckets.setdefault(id(p), torch.empty_like(p.grad))
        bucket.copy_(p.grad.to(torch.bfloat16))
        p.main_grad.add_(bucket)
"""

OVERRIDE_TRAIN = """import sys
import torch
from reducers import BucketReducer, Reducer
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
red = BucketReducer() if "--buckets" in sys.argv else Reducer()
x = torch.randn(32, 16)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.main_grad = torch.zeros_like(p)
            red.reduce_into(p)
            p.grad = p.main_grad
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_an_override_only_one_run_calls_is_proven_by_running_its_base_instead(tmp_path):
    files = {"train.py": OVERRIDE_TRAIN, "reducers.py": REDUCERS}
    case = script_case(tmp_path, "override", "--buckets", files)
    src = Path(case.run_b.cwd)
    site = extra_call(
        f"{src / 'reducers.py'}:15",
        step=0,
        event="<root>::aten::copy_",
        event_kind="op",
        phase="forward",
        order=3.5,
    )
    arms, _ = extra_call_arms(case, [site])
    assert [a.intervention for a in arms] == [
        "isolate-writes reducers:BucketReducer.reduce_into",
        "suppress reducers:BucketReducer.reduce_into",
        "replace reducers:BucketReducer.reduce_into=reducers:Reducer.reduce_into",
    ]
    result, st = triage(case)
    v = result.verdict
    assert v.classification.value == "bug", v
    assert "reducers.py:15 (BucketReducer.reduce_into)" in (v.location or "")
    proof = next(r for r in discriminator_rows(st) if r.arm == v.hypothesis)
    assert proof.outcome == "all 4 steps match", proof
    assert verdict_basis(st).kind == "intervention"
