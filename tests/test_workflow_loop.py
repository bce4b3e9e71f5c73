"""The workflow as one loop of general moves, on small real jobs that are not corpus cases.

- A flag only run B passes runs a helper that draws from the generator training draws from:
  the trace shows the draw only B makes, the loop isolates that function's generator state
  in B (the flag kept), every step matches, and the verdict is a bug at the draw's line.
- Two settings the job accepts only together (a world size and its accumulation steps): each
  alone fails to launch, so the loop tries them together, and that proves the pair.
- The chooser's two rules: nothing is tested once a cause is proven, and a test no
  observation asks for waits until the observations are made.
"""

from __future__ import annotations

import json
import re

from test_workflow_support import flags_case, resume_case, resume_job, script_case, triage

from triage_agent.interventions import intervene, parse_intervention
from triage_agent.ledger import Ledger
from triage_agent.ledger_view import verdict_basis
from triage_agent.records import EvidenceKind, EvidenceResult, HypothesisStatus
from triage_agent.workflow.boundary_state import BoundaryState
from triage_agent.workflow.chooser import rank
from triage_agent.workflow.engine import suggest_next
from triage_agent.workflow.moves import Move
from triage_agent.workflow.options import RunOptions

PEEK = '''"""A look at how the model does on a few inputs."""

import torch


def peek(model, x):
    idx = torch.randperm(x.shape[0])[:4]
    with torch.no_grad():
        return model(x[idx]).mean().item()
'''

PEEK_TRAIN = """import sys
import torch
from peek import peek
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1)
)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(5):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
        if "--peek" in sys.argv and step == 1:
            peek(model, x)
"""


def test_a_draw_only_b_makes_is_proven_by_isolating_its_generator_state(tmp_path):
    case = script_case(tmp_path, "peek", "--peek", {"train.py": PEEK_TRAIN, "peek.py": PEEK})
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 2
    assert v is not None and v.classification.value == "bug", v
    # a line of peek that draws only in B: its subset (7) or its forward's dropout mask (9),
    # whichever event the traces name first; the function isolated is the same
    assert re.search(r"peek\.py:[789] \(peek\)", v.location or ""), v.location
    basis = verdict_basis(st)
    assert basis is not None and basis.kind == "intervention"
    proof = next(e for e in st.evidence if e.id == basis.evidence)
    assert proof.data.interventions == ["isolate-rng peek:peek"]
    assert proof.data.applied_to == "b" and proof.result == EvidenceResult.supported
    # every move the loop made is in the ledger with why, in the order it was made
    choices = [e.data["choice"] for e in _notes(case) if "choice" in e.data]
    assert choices[0]["move"] in ("scan", "state")
    assert any(
        c["move"].startswith("arm|") and "isolate-rng peek:peek" in c["move"] for c in choices
    )
    # the flag was never needed: the draw's own test proved it, and nothing ran after
    assert not any("drop --peek" in c["move"] for c in choices)


COUPLED_TRAIN = """import argparse
import sys
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--world", type=int)
p.add_argument("--accum", type=int)
args = p.parse_args()
if args.world * args.accum != 4:
    sys.exit(f"world size {args.world} x accumulation {args.accum} must be the batch's 4 parts")
torch.manual_seed(0)
w = torch.randn(64, 1, requires_grad=True)
x = torch.randn(4, 16, 64)
with MetricLog(args.out, rank=0) as log:
    for step in range(3):
        shards = []
        for r in range(args.world):  # each "rank" accumulates its parts, then they are summed
            g = torch.zeros_like(w)
            for k in range(args.accum):
                part = x[r * args.accum + k]
                loss = (part @ w).pow(2).mean()
                g = g + torch.autograd.grad(loss, w)[0]
            shards.append(g)
        grad = torch.stack(shards).sum(0) / 4
        with torch.no_grad():
            w -= 0.01 * grad
        log.log(step, loss=loss.detach(), grad_norm=grad.norm())
"""


def test_settings_that_launch_only_together_are_tried_together(tmp_path):
    case = flags_case(
        tmp_path,
        "coupled",
        {"train.py": COUPLED_TRAIN},
        ["--world", "1", "--accum", "4"],
        ["--world", "2", "--accum", "2"],
    )
    result, st = triage(case)
    assert result.mismatch.step == 1  # step 0's gradients round alike; the update does not
    reruns = [e for e in st.evidence if e.kind == EvidenceKind.rerun]
    alone = [e for e in reruns if len(e.data.interventions) == 1]
    assert alone and all(e.result == EvidenceResult.error for e in alone), [
        (e.data.interventions, e.result) for e in alone
    ]
    together = [e for e in reruns if len(e.data.interventions) == 2]
    assert together and together[0].result == EvidenceResult.supported
    assert sorted(together[0].data.interventions) == ["config --accum=4", "config --world=1"]
    coupled = [h for h in st.hypotheses.values() if "launch only together" in h.statement]
    assert coupled and coupled[0].status == HypothesisStatus.supported
    assert result.verdict is not None and "coupled" in (result.verdict.location or "")
    # once proven, the chooser offers nothing more to test
    nxt = suggest_next(case, Ledger(case.workspace), RunOptions())
    assert nxt.mismatch_step == 1
    assert all(s.waits is not None or s.kind == "read" for s in nxt.suggestions)


def test_suggest_next_before_the_baselines_says_what_to_do_first(tmp_path):
    case = script_case(tmp_path, "peek", "--peek", {"train.py": PEEK_TRAIN, "peek.py": PEEK})
    nxt = suggest_next(case, Ledger(case.workspace), RunOptions())
    assert nxt.mismatch_step is None and nxt.suggestions == []
    assert "baselines have not run" in nxt.said


def _notes(case):
    events, _ = Ledger(case.workspace).read_events()
    return [e for e in events if e.kind == "note"]


def _move(key: str, kind: str, guided: bool, gain: float, cost: float) -> Move:
    return Move(
        key=key,
        kind=kind,
        what="arm" if kind == "test" else "scan",
        said=key,
        cost_s=cost,
        gain=gain,
        guided=guided,
        why=key,
    )


def test_the_chooser_ranks_by_value_and_holds_back_what_its_rules_say():
    moves = [
        _move("setting", "test", False, 0.5, 10),  # unguided: waits for the observation
        _move("trace", "observe", True, 0.7, 30),
        _move("state-arm", "test", True, 0.9, 10),
        _move("read", "read", True, 0.9, 10),
    ]
    order, held = rank(moves, proven=False)
    assert [m.key for m in order] == ["state-arm", "read", "trace"]
    assert [(m.key, why) for m, why in held] == [
        ("setting", "waits for the observations still to make")
    ]
    order, held = rank(moves, proven=True)
    assert [m.key for m in order] == ["read"]
    assert {m.key for m, _ in held} == {"setting", "trace", "state-arm"}
    assert json.loads(json.dumps([m.value for m in order])) == [0.09]


THREADS_TRAIN = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--threads", type=int)
args = p.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4096, 256)
with MetricLog(args.out, rank=0) as log:
    for step in range(3):
        h = model[1](model[0](x))
        loss = (h - h.mean()).pow(2).mean() + model[2](h).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_a_global_setting_the_runs_compute_under_is_found_and_proven_by_set(tmp_path):
    case = flags_case(
        tmp_path, "threads", {"train.py": THREADS_TRAIN}, ["--threads", "1"], ["--threads", "2"]
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "environment", v
    assert "setting:torch.num_threads" in (v.location or "")
    # read further: the one declared difference, tested too, is what sets it
    assert "set by config:--threads" in v.location, v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["set torch.num_threads=1"]
    manifest = next(e for e in st.evidence if e.kind == EvidenceKind.manifest)
    assert any("numeric setting torch.num_threads differs" in d for d in manifest.data.differences)


NOISE = '''"""Input noise whose every draw is seeded from how many draws came before."""

import torch


class Noise:
    def __init__(self):
        self.scale = 0.1
        self.calls = 0

    def draw(self, shape):
        torch.manual_seed(1000 + self.calls)
        self.calls += 1
        return self.scale * torch.randn(shape)

    def state_dict(self):
        return {"scale": self.scale}

    def load_state_dict(self, state):
        self.scale = state["scale"]
'''


def test_a_counter_a_seed_is_computed_from_is_named_with_both_values_and_put_back(tmp_path):
    (tmp_path / "noise.py").write_text(NOISE)
    (tmp_path / "train.py").write_text(
        resume_job(
            "x + noise.draw(x.shape)",
            "x = torch.randn(16, 6)\nnoise = Noise()",
            imports="from noise import Noise",
            state="noise",
        )
    )
    case = resume_case(
        tmp_path,
        "seed-counter",
        5,
        2,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "noise.py")],
    )
    result, st = triage(case)
    assert result.mismatch.step == 3
    manifest = next(e for e in st.evidence if e.kind == EvidenceKind.manifest)
    seeds = [d for d in manifest.data.differences if ": seed " in d]
    assert any(
        "torch.manual_seed(1003) in A, (1000) in B" in d and "noise.py:12 (Noise.draw)" in d
        for d in seeds
    ), seeds
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "noise.py:16" in (v.location or "") and "leaves out calls" in v.location, v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["restore-cursors"]
    # the state observation also proposed putting back A's value where step 3 starts, named
    # where Noise.state_dict returns what it saves; that test alone makes every step match
    attrs = [
        h for h in st.hypotheses.values() if "attributes its state_dict leaves out" in h.statement
    ]
    assert attrs and "calls 1 in B, 4 in A" in attrs[0].statement
    mark = next(m for m in st.stages if m.get("stage") == "state" and m.get("result"))
    arms = BoundaryState.model_validate(mark["result"]).arms
    # B's resumed process moves it by one before step 3's first forward: 4 - 1 is put back
    assert [a.intervention for a in arms if a.hypothesis.id == attrs[0].id] == [
        "restore-attrs noise:Noise.calls=3"
    ]
    res = intervene(
        case,
        "b",
        [parse_intervention("restore-attrs noise:Noise.calls=3")],
        ledger=Ledger(case.workspace),
        hypotheses=[attrs[0].id],
    )
    assert res.match.all_match and res.result == EvidenceResult.supported
    assert res.outcome.patches["noise:Noise.load_state_dict"]["called"] == 1


HASHED_TRAIN = """import sys
import torch
from penalty import penalty
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(6)], torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(3):
        loss = model(x).pow(2).mean() + penalty(model)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""

PENALTY = '''"""An L2 penalty over the weights, not the biases."""


def penalty(model):
    names = {n for n, _ in model.named_parameters() if n.endswith("weight")}
    params = dict(model.named_parameters())
    total = 0.0
    for name in names:
        total = total + params[name].pow(2).sum() / 7
    return total
'''


def test_an_order_taken_from_the_hash_seed_is_a_bug_at_the_line_that_runs_it(tmp_path):
    case = script_case(tmp_path, "hashed", "-", {"train.py": HASHED_TRAIN, "penalty.py": PENALTY})
    # the same command twice, each launcher with a hash seed of its own
    case = case.model_copy(
        update={
            "run_a": case.run_a.model_copy(
                update={"env": {"PYTHONHASHSEED": "1"}, "launch": [case.run_a.launch[0]]}
            ),
            "run_b": case.run_b.model_copy(
                update={"env": {"PYTHONHASHSEED": "3"}, "launch": [case.run_a.launch[0]]}
            ),
        }
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert (v.location or "").startswith("penalty.py:9;"), v.location
    assert "follows PYTHONHASHSEED" in v.statement and "not a numerical policy" in v.statement
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["env PYTHONHASHSEED=1"]


NP_TRAIN = """import sys
import numpy as np
import torch
from audit import look
from triage_agent.metrics import MetricLog

np.random.seed(5)
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(64, 8)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        x = data[torch.from_numpy(np.random.permutation(64)[:16])]
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
        if "--look" in sys.argv and step == 1:
            look(x)
"""

LOOK = '''"""A glance at a few rows of a batch."""

import numpy as np


def look(x):
    rows = np.random.choice(x.shape[0], 2)
    return x[rows].sum().item()
'''


def test_a_numpy_draw_only_b_makes_is_counted_at_its_line_and_isolated(tmp_path):
    case = script_case(tmp_path, "np-draw", "--look", {"train.py": NP_TRAIN, "audit.py": LOOK})
    result, st = triage(case)
    assert result.mismatch.step == 2
    manifest = next(e for e in st.evidence if e.kind == EvidenceKind.manifest)
    assert any(
        "draw numpy.random.choice at" in d and "audit.py:7 (look): 0 in A, 1 in B" in d
        for d in manifest.data.differences
    ), manifest.data.differences
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "audit.py:7" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["isolate-rng audit:look"]


MONITOR = '''"""Gradient statistics, recorded by a hook."""

import torch

SEEN = []


def unit_direction(grad):
    flat = grad.view(-1)
    flat /= flat.norm().clamp(min=1e-12)
    return flat


def watch(model):
    for p in model.parameters():
        p.register_hook(lambda g: SEEN.append(float(unit_direction(g)[0])))
'''

MONITOR_TRAIN = """import sys
import torch
import monitor
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        if "--watch" in sys.argv and step == 1:
            monitor.watch(model)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_a_write_to_what_a_call_is_handed_is_proven_by_putting_it_back(tmp_path):
    # a hook under a flag normalises each gradient through a view: suppressing the function
    # breaks its caller; putting back the tensor it was handed keeps what it returns
    case = script_case(
        tmp_path, "monitor", "--watch", {"train.py": MONITOR_TRAIN, "monitor.py": MONITOR}
    )
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 2
    assert v is not None and v.classification.value == "bug", v
    assert "monitor.py:10" in (v.location or ""), v.location
    basis = verdict_basis(st)
    assert basis is not None and basis.kind == "intervention"
    proof = next(e for e in st.evidence if e.id == basis.evidence)
    assert proof.data.interventions == ["isolate-writes monitor:unit_direction"]
    assert proof.data.applied_to == "b" and proof.result == EvidenceResult.supported


EPS_TRAIN = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--eps", type=float, default=1e-8)
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=0.01, eps=args.eps, foreach=False)
x = torch.randn(32, 8)
with MetricLog(args.out, rank=0) as log:
    for step in range(4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_a_hyper_parameter_handed_to_the_arithmetic_as_it_is_reads_as_a_policy(tmp_path):
    # the first divergent op is given another scalar, and that scalar is the flag's own value:
    # two choices of one hyper-parameter, not a value the flag should have left alone
    case = flags_case(
        tmp_path, "eps", {"train.py": EPS_TRAIN}, ["--eps", "1e-8"], ["--eps", "1e-6"]
    )
    result, _ = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "policy-difference", v
    assert (v.location or "").startswith("config:--eps"), v.location


RING_TRAIN = """import argparse
import torch
from targets import Targets, smooth
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--reuse-targets", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(24, 6)
targets = Targets(reuse=args.reuse_targets)
with MetricLog(args.out, rank=0) as log:
    for step in range(7):
        y = smooth(targets.get(step))
        loss = -(torch.log_softmax(model(x), dim=1) * y).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""

RING_TARGETS = """import torch


class Targets:
    # one-hot targets of three label sets, in turn; kept after their first use on request

    def __init__(self, reuse):
        self.reuse = reuse
        self.kept = {}

    def get(self, step):
        k = step % 3
        if k in self.kept:
            return self.kept[k]
        labels = torch.arange(24).add(k).remainder(4)
        y = torch.nn.functional.one_hot(labels, 4).float()
        if self.reuse:
            self.kept[k] = y
        return y


def smooth(y):
    return y.mul_(0.9).add_(0.025)
"""


def test_a_value_written_in_place_and_read_again_steps_later_is_found_and_put_out_of_place(
    tmp_path,
):
    # B keeps three target tensors and hands each out again three steps later, after the step
    # smoothed it in place: the first receiver's input was written by no event of the traced
    # window, and the trace back to the first step finds the in-place write that wrote it
    case = script_case(
        tmp_path,
        "ring",
        "--reuse-targets",
        {"train.py": RING_TRAIN, "targets.py": RING_TARGETS},
    )
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 3
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(RING_TARGETS.splitlines(), 1) if "mul_(0.9)" in s)
    assert v.location == f"targets.py:{line}", v.location
    basis = verdict_basis(st)
    proof = next(e for e in st.evidence if e.id == basis.evidence)
    assert proof.data.interventions == [f"outplace targets.py:{line}"]
    assert proof.data.applied_to == "b" and proof.result == EvidenceResult.supported
    back = [e for e in st.evidence if "producer search" in e.summary]
    assert back and "a value carried across steps" in back[-1].summary


WARMUP = '''"""A warm-up factor whose progress the module holds, advanced once per batch."""

_seen = 0


def start():
    global _seen
    _seen = 0


def factor():
    global _seen
    _seen += 1
    return min(1.0, _seen / 4)
'''


def test_a_module_global_a_resume_starts_again_is_put_back_and_named_where_it_is_reset(tmp_path):
    (tmp_path / "warmup.py").write_text(WARMUP)
    (tmp_path / "train.py").write_text(
        resume_job(
            "x * warmup.factor()",
            "x = torch.randn(16, 6)\nwarmup.start()",
            imports="import warmup",
        )
    )
    case = resume_case(
        tmp_path,
        "module-global",
        5,
        2,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "warmup.py")],
    )
    result, st = triage(case)
    assert result.mismatch.step == 3
    manifest = next(e for e in st.evidence if e.kind == EvidenceKind.manifest)
    assert any("module global warmup._seen differs" in d for d in manifest.data.differences)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    # the set-up that assigns the global its initial value again, not the import's line
    assert "warmup.py:8" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    # A's value where B declares its resume: three batches seen after step 2
    assert proof.data.interventions == ["restore-globals warmup._seen=3"]
    assert proof.result == EvidenceResult.supported


SNAPS = '''"""Snapshots: one file per block of steps, never rewritten (a replayed block writes the
same bytes again), and a pointer to the newest."""

import json
import os

import torch

BLOCK = 4


def snap_file(d, step):
    return os.path.join(d, "snap_{:02d}.pt".format(step // BLOCK))


def save(d, step, net, opt):
    path = snap_file(d, step)
    if not os.path.exists(path):
        torch.save({"net": net.state_dict(), "opt": opt.state_dict()}, path)
    with open(os.path.join(d, "newest.json"), "w") as fh:
        json.dump(step, fh)


def load(d, net, opt):
    with open(os.path.join(d, "newest.json")) as fh:
        step = json.load(fh)
    ck = torch.load(snap_file(d, step))
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    return step
'''

SNAP_TRAIN = """import os, sys
import torch
from triage_agent.metrics import MetricLog
import snaps

out, last, d, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
torch.manual_seed(1)
net = torch.nn.Linear(6, 1)
opt = torch.optim.Adam(net.parameters(), lr=0.05)
step, resumed = 0, None
if resume:
    resumed = snaps.load(d, net, opt)
    step = resumed + 1
os.makedirs(d, exist_ok=True)
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(step))
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if step % 2 == 1:
        snaps.save(d, step, net, opt)
    step += 1
log.close()
"""


def test_a_resume_that_reads_an_older_file_is_placed_at_the_template_that_names_it(tmp_path):
    (tmp_path / "snaps.py").write_text(SNAPS)
    (tmp_path / "train.py").write_text(SNAP_TRAIN)
    cmd = ["{python}", "train.py", "{out}"]
    case = resume_case(
        tmp_path,
        "stale-snapshot",
        7,
        3,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "snaps.py")],
    )
    # B: steps 0..3 saving after 1 and 3 (both into snap_00.pt, whose first write stays),
    # then a new process resuming from step 3 with step 1's state
    case.run_a.launch = [[*cmd, "7", "{out}/snaps", "0"]]
    case.run_b.launch = [[*cmd, "3", "{out}/snaps", "0"], [*cmd, "7", "{out}/snaps", "1"]]
    result, st = triage(case)
    assert result.mismatch.step == 4
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "snaps.py:13 (names the checkpoint file snap_00.pt" in (v.location or ""), v.location
    assert "written after step 1" in v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions[0].startswith("restore-state ")


SETUP = '''"""Set-up run at every start: the output bias starts at zero."""

import torch


def start(net):
    with torch.no_grad():
        net.bias.zero_()
'''


def test_a_set_up_that_writes_over_the_restored_model_is_named_not_the_load(tmp_path):
    (tmp_path / "setup.py").write_text(SETUP)
    (tmp_path / "train.py").write_text(
        resume_job(
            "x",
            "x = torch.randn(16, 6)",
            imports="import setup",
            on_resume="setup.start(net)",
        )
    )
    case = resume_case(
        tmp_path,
        "setup-after-load",
        5,
        2,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "setup.py")],
    )
    result, st = triage(case)
    assert result.mismatch.step == 3
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "setup.py:8 (writes the restored state again after the load" in (v.location or ""), (
        v.location
    )
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["restore-state model"]


OPTIONS = """def option(text, default):
    # an unset option keeps its default
    return float(text) or default
"""

SMOOTHED_TRAIN = """import argparse
import torch
import torch.nn.functional as F
from options import option
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--label-smoothing", default="0.0")
args = p.parse_args()
smoothing = option(args.label_smoothing, 0.1) if args.label_smoothing != "0.0" else 0.0
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = MetricLog(args.out)
for step in range(5):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(12, 6, generator=g), torch.randint(0, 4, (12,), generator=g)
    loss = F.cross_entropy(model(x), y, label_smoothing=smoothing)
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.item())
log.close()
"""


def test_a_flag_that_restates_the_default_and_is_read_as_another_value_is_a_bug_where_it_is_read(
    tmp_path,
):
    # B passes --label-smoothing 0, which states A's value; the job's reader turns 0 into its
    # default 0.1. Dropping the flag proves it carries the difference; following its text
    # finds the function that made another value of it, and giving back what the text
    # states there, the flag kept, makes every step match.
    case = flags_case(
        tmp_path,
        "restated-flag",
        {"train.py": SMOOTHED_TRAIN, "options.py": OPTIONS},
        [],
        ["--label-smoothing", "0"],
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert (v.location or "").startswith("options.py:3 (option)"), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["as-stated options:option=0"]
    read = [n["text"] for n in st.notes if n.get("texts_read")]
    assert read and "options:option (options.py:3) made 0.1 of '0'" in read[0], read


GROUPS = """def parameter_list(model):
    # the encoder's, then the decoder's
    return list(model.enc.parameters()) + list(model.dec.parameters())
"""

TIED_TRAIN = """import argparse
import torch
from groups import parameter_list
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--per-part-params", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Module()
model.enc = torch.nn.Linear(6, 6)
model.dec = torch.nn.Linear(6, 6)
model.dec.weight = model.enc.weight  # tied
params = parameter_list(model) if args.per_part_params else list(model.parameters())
opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
log = MetricLog(args.out)
for step in range(5):
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(step))
    loss = model.dec(torch.tanh(model.enc(x))).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.item())
log.close()
"""


def test_a_parameter_an_optimizer_lists_twice_is_named_where_the_list_is_made(tmp_path):
    # B hands SGD the encoder's and the decoder's parameters, and the weight they share
    # appears twice: each step moves it twice. The state check sees it held twice; dropping
    # the repeat as the optimizer is built makes every step match, and the list's maker is
    # named at its return.
    case = flags_case(
        tmp_path,
        "listed-twice",
        {"train.py": TIED_TRAIN, "groups.py": GROUPS},
        [],
        ["--per-part-params"],
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "/src/groups.py:3 (lists enc.weight a second time" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["unique-params"]


PROBES = """import torch


def attach(model, seen):
    def record(module, args):
        x = args[0]
        seen.append(float(x.abs().mean()))
        # a rounded copy for the log
        return (torch.round(x * 64) / 64,)

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            layer.register_forward_pre_hook(record)
"""

PROBED_TRAIN = """import argparse
import torch
from probes import attach
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--probe-inputs", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
seen = []
if args.probe_inputs:
    attach(model, seen)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
log = MetricLog(args.out)
for step in range(5):
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(step))
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.item())
log.close()
"""


def test_a_hook_that_returns_what_it_looked_at_is_named_at_its_return(tmp_path):
    # B's input probe is a forward pre-hook that returns a rounded copy of the input it
    # records, which replaces the layer's input. The state check sees hooks only B's modules
    # hold; running them with their values dropped makes every step match, and the hook's
    # return line is named.
    case = flags_case(
        tmp_path,
        "probe-hook",
        {"train.py": PROBED_TRAIN, "probes.py": PROBES},
        [],
        ["--probe-inputs"],
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "/src/probes.py:9 (returns a value from a forward pre-hook" in (v.location or ""), v
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["observe-hooks"]


EPOCHS_TRAIN = """import argparse
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--log-epoch-end", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
data = TensorDataset(torch.randn(12, 5, generator=g), torch.randn(12, 1, generator=g))
sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=3)
loader = DataLoader(data, batch_size=4, sampler=sampler)
model = torch.nn.Linear(5, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = MetricLog(args.out)
step = 0
for epoch in range(3):
    if not args.log_epoch_end:
        sampler.set_epoch(epoch)
    for x, y in loader:
        loss = (model(x) - y).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.item())
        step += 1
    if args.log_epoch_end:
        sampler.set_epoch(epoch)  # with the epoch's summary
        print(f"epoch {epoch} done")
log.close()
"""


def test_a_sampler_epoch_set_after_its_pass_is_named_where_the_pass_begins(tmp_path):
    # B sets the sampler's epoch as each epoch ends, so every epoch runs in the previous
    # one's order. The state check sees B's sampler an epoch behind where the second epoch
    # starts; advancing it as each pass begins makes every step match.
    case = flags_case(tmp_path, "late-epoch", {"train.py": EPOCHS_TRAIN}, [], ["--log-epoch-end"])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "/src/train.py:23 (begins another pass" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["advance-epochs"]


AMP_TRAIN = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--early-clip", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
log = MetricLog(args.out)
for step in range(5):
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(step))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x).float().square().mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    if args.early_clip:
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
    scaler.unscale_(opt)
    if not args.early_clip:
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
    scaler.step(opt)
    scaler.update()
    log.log(step, loss=loss.item())
log.close()
"""


def test_a_clip_of_gradients_still_scaled_is_named_where_it_clips(tmp_path):
    # B clips by value before the GradScaler takes its scale out: the clip meets gradients
    # 1024 times too large. Unscaling before any clip of still-scaled gradients makes every
    # step match, and the clip's line is named.
    case = flags_case(tmp_path, "early-clip", {"train.py": AMP_TRAIN}, [], ["--early-clip"])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "/src/train.py:21 (clip_grad_value_ on gradients" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["unscale-first"]


LEFTOVER = """import os
import torch


def class_weights():
    # the start-up log's scratch row of this process's id, freed before the counts are made
    scratch = torch.full((4096,), float(os.getpid() % 9973))
    del scratch
    counts = torch.empty(2048)
    counts[1024:] = 1.0  # the second half of the classes are all seen once
    seen = torch.nan_to_num(counts, 0.0, 0.0, 0.0).clamp(-1e4, 1e4)
    return torch.sigmoid(seen.mean() * 1e-3).expand(16).clone()
"""

LEFTOVER_TRAIN = """import sys
import torch
from stats import class_weights
from triage_agent.metrics import MetricLog

weights = class_weights()
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = MetricLog(sys.argv[sys.argv.index("--out") + 1])
for step in range(4):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step))
    loss = (model(x * weights)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.item())
log.close()
"""


def test_memory_a_repeat_reads_before_writing_is_named_where_it_is_allocated(tmp_path):
    # A run against its repeat: the class counts start from torch.empty and their first half
    # is never written, so it holds the bytes of a freed scratch row of the process's own
    # id, which every launch has another of. Zeroing what that line allocates, in both runs,
    # makes every step match. (The scratch row is larger than the counts, so the allocator
    # hands its memory back whatever came before.)
    case = flags_case(
        tmp_path, "leftover", {"train.py": LEFTOVER_TRAIN, "stats.py": LEFTOVER}, [], []
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert (v.location or "").startswith("stats.py:9"), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["fill-empty stats.py:9"]


ORDER_NET = """import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 12)
        self.head = torch.nn.Linear(12, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


class Stream:
    def __init__(self, seed):
        torch.manual_seed(seed)  # the data's own stream

    def batch(self):
        return torch.randn(8, 6)
"""

ORDER_TRAIN = """import argparse
import torch
from net import Net, Stream
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--open-data-first", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
stream = Stream(100) if args.open_data_first else None
model = Net()
stream = stream or Stream(100)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = MetricLog(args.out)
for step in range(4):
    loss = model(stream.batch()).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.item())
log.close()
"""


def test_a_seeding_moved_before_the_model_is_built_is_named_where_the_set_up_reaches_it(
    tmp_path,
):
    # B opens its data stream, which seeds torch's generator, before it builds the model:
    # the same seedings with the same values, in another order, so the model's weights come
    # from the data's seed. The state check sees the seeding made with no parameter built
    # in B and four in A; seeding the model's construction from its own call in both runs
    # makes every step match, and B's line that reached the seeding first is named.
    case = flags_case(
        tmp_path,
        "seed-order",
        {"train.py": ORDER_TRAIN, "net.py": ORDER_NET},
        [],
        ["--open-data-first"],
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert (v.location or "").startswith("train.py:11"), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions == ["seed-rng net:Net.__init__"]
