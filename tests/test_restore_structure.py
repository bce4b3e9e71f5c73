"""Training state no state_dict holds: modules' modes, parameter names sharing one tensor, the
optimizer's membership, gradients accumulated before a checkpoint. Observed by the state
capture, put back by ``restore-state grads|ties|modes`` and by ``isolate-writes``, on jobs
that are not corpus cases:

- an autoencoder whose decoder is tied to its encoder, resumed by code that gives the
  decoder a Parameter of its own: ``restore-state ties`` proves it, named at that line;
- a job that checkpoints every five micro-batches of a four-micro-batch window, with a
  checkpoint that holds no gradients: ``restore-state grads`` proves it, named at the line
  that writes the checkpoint;
- a monitoring helper under a flag that scores the model in eval mode and never puts it
  back: ``isolate-writes`` on the helper proves it, named inside the helper;
- a resume that attaches a module's output-scaling hook again, so the resumed process
  scales twice: ``restore-state hooks`` proves it, named at the restore's call;
- a learning rate the job halves on a plateau, kept only in the optimizer's param groups,
  and a resume that hands the groups the launch's rate again after loading the optimizer:
  ``restore-state groups`` proves it, named at that write;
- a warm-up counter kept as a buffer registered with ``persistent=False``, so a resumed
  process warms up again: ``restore-state buffers`` proves it, named where it is registered.
"""

from __future__ import annotations

import torch
from test_workflow_support import resume_case, script_case, triage

from triage_agent.ledger_view import verdict_basis
from triage_agent.manifest import BoundaryRecord, build_manifest, diff_manifests
from triage_agent.module_structure import (
    grads,
    put_back_buffers,
    put_back_grads,
    put_back_hooks,
    put_back_modes,
    put_back_ties,
    structure,
    unsaved_buffers,
)
from triage_agent.records import EvidenceResult
from triage_agent.workflow.boundary_state import PointDiff, structure_arms


def _proof(st):
    """The evidence the verdict rests on."""
    return next(e for e in st.evidence if e.id == verdict_basis(st).evidence)


class Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = torch.nn.Linear(4, 3, bias=False)
        self.drop = torch.nn.Dropout(0.5)
        self.dec = torch.nn.Linear(3, 4, bias=False)
        self.dec.weight = self.enc.weight  # (3, 4): one tensor, two names


def test_structure_sees_modes_ties_and_what_no_optimizer_holds_and_puts_them_back():
    torch.manual_seed(0)
    m = Tied()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    saved = structure(m, [opt])
    assert saved == {
        "eval_modules": "",
        "frozen": "",
        "tied": "enc.weight=dec.weight",
        "hooks": "",
        "outside_optimizer": "",
        "held_twice": "",  # the tied weight is one parameter, listed once
    }
    m.drop.eval()
    m.enc.weight.requires_grad_(False)
    m.dec.weight = torch.nn.Parameter(m.enc.weight.detach().clone())
    now = structure(m, [opt])
    assert now["eval_modules"] == "drop" and now["tied"] == "" and now["frozen"] == "enc.weight"
    assert now["outside_optimizer"] == "dec.weight"
    assert put_back_ties(m, saved["tied"], [opt]) == ["dec.weight"]
    assert m.dec.weight is m.enc.weight  # the one the optimizer steps
    assert put_back_modes(m, saved["eval_modules"], saved["frozen"]) == 2
    assert m.drop.training and m.enc.weight.requires_grad
    assert structure(m, [opt]) == saved


def test_gradients_are_read_by_name_and_put_back_as_they_were():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    m(torch.randn(5, 3)).sum().backward()
    kept = {n: g.clone() for n, g in grads(m).items()}
    assert set(kept) == {"weight", "bias"}
    m.zero_grad(set_to_none=True)
    assert grads(m) == {}
    assert put_back_grads(m, kept) == 2
    assert torch.equal(m.weight.grad, kept["weight"]) and torch.equal(m.bias.grad, kept["bias"])


def _manifest(structure_: dict, grads_: dict):
    return build_manifest({"model_structure": structure_, "model_grads": grads_}, rank=0)


def test_a_round_trip_that_loses_grads_ties_or_modes_asks_for_that_part_alone():
    step_end, window = {"w": torch.ones(2)}, {"w": torch.full((2,), 0.5)}
    tied = {"eval_modules": "", "tied": "a=b"}
    # the saving process: after step 2, then as it wrote its checkpoint inside step 3
    after = BoundaryRecord(point="after-2", pid=1, manifest=_manifest(tied, step_end))
    end = BoundaryRecord(point="end-2", pid=1, manifest=_manifest(tied, window))
    lost = _manifest({"eval_modules": "", "tied": ""}, {})

    def trip(saved, resumed) -> PointDiff:
        d = diff_manifests(saved, resumed)
        return PointDiff(point="after-2", rank=0, between="B saved vs B resumed", diff=d)

    arms = structure_arms([trip(end.manifest, lost)], {"b": [after, end]}, 2)
    assert [a.intervention for a in arms] == ["restore-state grads", "restore-state ties"]
    assert all(a.run == "b" and a.location.startswith("state:") for a in arms)
    # saved at the step boundary, its gradients are the step's leftovers the next one
    # zeroes: a resume that drops them loses nothing
    at_boundary = end.model_copy(update={"manifest": _manifest(tied, step_end)})
    arms = structure_arms([trip(at_boundary.manifest, lost)], {"b": [after, at_boundary]}, 2)
    assert [a.intervention for a in arms] == ["restore-state ties"]
    moded = _manifest({"eval_modules": "drop", "tied": "a=b"}, window)
    arms = structure_arms([trip(end.manifest, moded)], {"b": [after, end]}, 2)
    assert [a.intervention for a in arms] == ["restore-state modes"]
    # between the two runs, not across a resume: no restore applies
    same = trip(end.manifest, lost).model_copy(update={"between": "A vs B"})
    assert structure_arms([same], {"b": [after, end]}, 2) == []


TIED_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


class AutoEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(6, 3, bias=False)
        self.dec = torch.nn.Linear(6, 3, bias=False)  # used transposed: x @ dec.weight
        self.dec.weight = self.enc.weight


def restore(net, opt, path):
    ck = torch.load(path)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    net.dec.weight = torch.nn.Parameter(ck["net"]["dec.weight"].clone())
    return ck["step"]


torch.manual_seed(1)
net = AutoEncoder()
opt = torch.optim.Adam(net.parameters(), lr=0.01)
x = torch.randn(16, 6)
step, resumed = 0, None
if resume != "-":
    resumed = restore(net, opt, resume)
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = (torch.tanh(net.enc(x)) @ net.dec.weight - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach(), grad=net.enc.weight.grad.norm())
    if step == last and save != "-":
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step}, save)
    step += 1
log.close()
"""


def test_a_resume_that_unties_a_weight_is_proven_by_tying_it_again(tmp_path):
    job = TIED_JOB
    (tmp_path / "train.py").write_text(job)
    case = resume_case(tmp_path, "untied", steps=5, save_at=2, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 3
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(job.splitlines(), 1) if "torch.nn.Parameter(ck" in s)
    assert f"train.py:{line}" in (v.location or ""), v.location
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state ties"]
    assert proof.result == EvidenceResult.supported


WINDOW_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, micro_to, ckpt, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
PER_STEP, EVERY = 4, 5


def write(path, net, opt, micro):
    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "micro": micro}, path)


torch.manual_seed(2)
net = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
data = torch.randn(64, 5)
micro, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    micro = ck["micro"]
    resumed = micro // PER_STEP - 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while micro < micro_to:
    if micro % PER_STEP == 0:
        opt.zero_grad(set_to_none=True)
    x = data[(micro * 4) % 64 :][:4]
    (net(x).pow(2).mean() / PER_STEP).backward()
    micro += 1
    if micro % PER_STEP == 0:
        norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 10.0)
        opt.step()
        log.log(micro // PER_STEP - 1, grad_norm=norm)
    if ckpt != "-" and micro % EVERY == 0:
        write(ckpt, net, opt, micro)
log.close()
"""


def test_a_checkpoint_inside_an_accumulation_window_is_proven_by_its_gradients(tmp_path):
    (tmp_path / "train.py").write_text(WINDOW_JOB)
    # B stops after micro-batch 10 (a checkpoint there, two micro-batches into step 2)
    case = resume_case(tmp_path, "window", steps=20, save_at=10, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 2
    assert v is not None and v.classification.value == "bug", v
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state grads"]
    assert proof.result == EvidenceResult.supported
    # no load brings gradients back: the place is the dict that lists what the checkpoint
    # holds (here the torch.save line itself), and the line that writes it
    line = next(i for i, s in enumerate(WINDOW_JOB.splitlines(), 1) if "torch.save(" in s)
    assert f"train.py:{line} (lists what the checkpoint holds: micro, net, opt" in (
        v.location or ""
    ), v.location
    assert f"written at {case.run_b.cwd}/train.py:{line} without grads" in v.location or (
        f"written at train.py:{line} without grads" in v.location
    ), v.location


MONITOR = """import torch


def probe_score(net, x):
    net.eval()
    with torch.no_grad():
        return net(x).mean().item()
"""

MONITORED_JOB = """import sys

import torch

import monitor
from triage_agent.metrics import MetricLog

torch.manual_seed(3)
net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
x, probe = torch.randn(8, 6), torch.randn(4, 6)
net.train()
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(6):
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
        if "--monitor" in sys.argv and step == 2:
            print("probe", monitor.probe_score(net, probe))
"""


def test_a_helper_that_leaves_the_model_in_eval_mode_is_proven_by_isolating_it(tmp_path):
    case = script_case(
        tmp_path, "monitor", "--monitor", {"train.py": MONITORED_JOB, "monitor.py": MONITOR}
    )
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 3
    assert v is not None and v.classification.value == "bug", v
    assert "monitor.py:" in (v.location or ""), v.location
    proof = _proof(st)
    assert proof.data.interventions == ["isolate-writes monitor:probe_score"]


LOSSY_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def write(path, net, opt, step):
    small = {k: v.to(torch.bfloat16) for k, v in net.state_dict().items()}
    torch.save({"net": small, "opt": opt.state_dict(), "step": step}, path)


def read(path, net, opt):
    ck = torch.load(path)
    net.load_state_dict({k: v.float() for k, v in ck["net"].items()})
    opt.load_state_dict(ck["opt"])
    return ck["step"]


torch.manual_seed(4)
net = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.Adam(net.parameters(), lr=0.01)
x = torch.randn(16, 5)
step, resumed = 0, None
if resume != "-":
    resumed = read(resume, net, opt)
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if step == last and save != "-":
        write(save, net, opt, step)
    step += 1
log.close()
"""


def test_a_checkpoint_that_rounds_the_model_is_proven_and_named_at_its_write_and_load(tmp_path):
    (tmp_path / "train.py").write_text(LOSSY_JOB)
    case = resume_case(tmp_path, "lossy", steps=5, save_at=2, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 3
    assert v is not None and v.classification.value == "bug", v
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state model"]
    lines = LOSSY_JOB.splitlines()
    wrote = next(i for i, s in enumerate(lines, 1) if "torch.save(" in s)
    loaded = next(i for i, s in enumerate(lines, 1) if "net.load_state_dict(" in s)
    assert f"train.py:{wrote} (writes the checkpoint)" in (v.location or ""), v.location
    assert f"train.py:{loaded} (loads model" in (v.location or ""), v.location


PROBE = """import torch


def fit_probe(backbone, x):
    for p in backbone.parameters():
        p.requires_grad_(False)
    feats = backbone(x)
    w = torch.zeros(feats.shape[1], requires_grad=True)
    (feats @ w).pow(2).mean().backward()
    return w.grad.norm().item()
"""

PROBED_JOB = (
    MONITORED_JOB.replace("import monitor", "import probe")
    .replace(
        'if "--monitor" in sys.argv and step == 2:\n            print("probe", monitor.probe_score(net, probe))',
        'if "--probe" in sys.argv and step == 2:\n            print("probe", probe.fit_probe(net[0], x))',
    )
    .replace("x, probe = torch.randn(8, 6), torch.randn(4, 6)", "x = torch.randn(8, 6)")
)


def test_a_helper_that_leaves_parameters_frozen_is_proven_by_isolating_it(tmp_path):
    assert "probe.fit_probe(net[0], x)" in PROBED_JOB
    case = script_case(tmp_path, "frozen", "--probe", {"train.py": PROBED_JOB, "probe.py": PROBE})
    result, st = triage(case)
    v = result.verdict
    # step 3's loss is computed before the update the frozen layer misses
    assert result.mismatch.step == 4
    assert v is not None and v.classification.value == "bug", v
    assert "probe.py:" in (v.location or ""), v.location
    proof = _proof(st)
    assert proof.data.interventions == ["isolate-writes probe:fit_probe"]


def test_hooks_are_counted_per_module_and_parameter_and_the_latest_extra_removed():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    first = m[0].weight.register_hook(lambda g: g * 0.5)
    m[1].register_forward_hook(lambda mod, i, o: o * 2)
    saved = structure(m, [])["hooks"]
    assert saved == "0.weight:tensor_backward_hooks=1,1:forward_hooks=1"
    m[0].weight.register_hook(lambda g: g * 0.5)
    m[1].register_forward_hook(lambda mod, i, o: o * 2)
    assert structure(m, [])["hooks"] == "0.weight:tensor_backward_hooks=2,1:forward_hooks=2"
    assert put_back_hooks(m, saved) == {"0.weight:tensor_backward_hooks": 1, "1:forward_hooks": 1}
    assert structure(m, [])["hooks"] == saved
    assert list(m[0].weight._backward_hooks) == [first.id]  # the first one registered stays
    x = torch.ones(1, 2)
    m(x).sum().backward()
    ref = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    ref.load_state_dict(m.state_dict())
    ref[0].weight.register_hook(lambda g: g * 0.5)
    ref[1].register_forward_hook(lambda mod, i, o: o * 2)
    ref(x).sum().backward()
    assert torch.equal(m[0].weight.grad, ref[0].weight.grad)


HOOK_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def temper(module, inputs, output):
    return output * 0.5


def attach(net):
    net[2].register_forward_hook(temper)


def restore(net, opt, path):
    ck = torch.load(path)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    attach(net)
    return ck["step"]


torch.manual_seed(3)
net = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
attach(net)
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
x, y = torch.randn(12, 5), torch.randn(12, 2)
step, resumed = 0, None
if resume != "-":
    resumed = restore(net, opt, resume)
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if step == last and save != "-":
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step}, save)
    step += 1
log.close()
"""


def test_a_resume_that_attaches_a_hook_again_is_proven_by_removing_the_extra_one(tmp_path):
    (tmp_path / "train.py").write_text(HOOK_JOB)
    case = resume_case(tmp_path, "rehooked", steps=5, save_at=2, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 3
    assert v is not None and v.classification.value == "bug", v
    # the restore's call of the set-up, the turn the second registration took
    line = next(i for i, s in enumerate(HOOK_JOB.splitlines(), 1) if s == "    attach(net)")
    assert f"train.py:{line}" in (v.location or ""), v.location
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state hooks"]
    assert proof.result == EvidenceResult.supported


class Warmup(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("seen", torch.zeros((), dtype=torch.long), persistent=False)
        self.register_buffer("kept", torch.ones(2))


def test_buffers_left_out_of_the_state_dict_are_read_by_name_and_put_back():
    outer = torch.nn.Sequential(Warmup(), torch.nn.Tanh())
    left = unsaved_buffers(outer)
    assert list(left) == ["0.seen"]  # "kept" is persistent: the state_dict holds it
    assert "0.seen" not in outer.state_dict()
    saved = {"0.seen": torch.tensor(7), "0.gone": torch.ones(3)}
    assert put_back_buffers(outer, saved) == ["0.seen"]  # a buffer no longer there is left
    assert int(outer[0].seen) == 7


BUFFER_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


class WarmupScale(torch.nn.Module):
    \"\"\"Scales its input from 1/4 up to 1 over the first four training forwards.\"\"\"

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long), persistent=False)

    def forward(self, x):
        if self.training:
            self.calls += 1
        return x * torch.clamp(self.calls.float() / 4, max=1.0)


torch.manual_seed(4)
net = torch.nn.Sequential(torch.nn.Linear(5, 6), WarmupScale(), torch.nn.Tanh(), torch.nn.Linear(6, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(10, 5), torch.randn(10, 1)
step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    resumed = ck["step"]
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if step == last and save != "-":
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step}, save)
    step += 1
log.close()
"""


def test_a_buffer_the_checkpoint_leaves_out_is_proven_and_named_where_it_is_registered(tmp_path):
    (tmp_path / "train.py").write_text(BUFFER_JOB)
    case = resume_case(tmp_path, "unsaved", steps=5, save_at=1, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 2
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(BUFFER_JOB.splitlines(), 1) if "persistent=False" in s)
    assert f"train.py:{line}" in (v.location or ""), v.location
    assert "calls" in v.location
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state buffers"]
    assert proof.result == EvidenceResult.supported


PLATEAU_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
BASE_LR = 0.2

torch.manual_seed(5)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=BASE_LR, momentum=0.5)
x, y = torch.randn(16, 4), torch.randn(16, 1)
step, resumed, best = 0, None, float("inf")
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    best, resumed = ck["best"], ck["step"]
    step = resumed + 1
    for g in opt.param_groups:
        g["lr"] = BASE_LR
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if loss.item() > best * 0.95:  # little progress: halve the rate
        for g in opt.param_groups:
            g["lr"] = g["lr"] * 0.5
    best = min(best, loss.item())
    if step == last and save != "-":
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "best": best, "step": step}, save)
    step += 1
log.close()
"""


def test_a_resume_that_sets_a_group_rate_again_is_proven_and_named_at_that_write(tmp_path):
    (tmp_path / "train.py").write_text(PLATEAU_JOB)
    case = resume_case(tmp_path, "plateau", steps=9, save_at=5, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(PLATEAU_JOB.splitlines(), 1) if "= BASE_LR" in s)
    assert f"train.py:{line}" in (v.location or ""), v.location
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state groups"]
    assert proof.result == EvidenceResult.supported


WARMUP_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

torch.manual_seed(9)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
net[0].weight.requires_grad = False  # the first layer's weight waits for the head
opt = torch.optim.Adam(net.parameters(), lr=0.05)
step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    resumed = ck["step"]
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    if step == 2:
        net[0].weight.requires_grad = True
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if step == last and save != "-":
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step}, save)
    step += 1
log.close()
"""


def test_a_flag_set_once_before_the_save_is_named_where_the_saving_process_set_it(tmp_path):
    # requires_grad is no state_dict's: the resumed process builds the layer frozen again and
    # never reaches the step that thawed it; the place is the saving process's write
    (tmp_path / "train.py").write_text(WARMUP_JOB)
    case = resume_case(tmp_path, "thaw", steps=8, save_at=4, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(WARMUP_JOB.splitlines(), 1) if "= True" in s)
    assert f"train.py:{line} (sets it in the process that saved" in (v.location or ""), v.location
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state modes"]
    assert proof.result == EvidenceResult.supported


LATE_SAVE_JOB = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

torch.manual_seed(4)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.Adam(net.parameters(), lr=0.05)
step, resumed, keep = 0, None, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    resumed = ck["step"]
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
    if save != "-" and step == last - 1:  # keep the state of the step before the last
        keep = {"net": net.state_dict(), "opt": opt.state_dict(), "step": step}
    step += 1
log.close()
if keep is not None:
    torch.save(keep, save)
"""


def test_a_checkpoint_that_holds_a_later_steps_state_is_named_where_it_took_it(tmp_path):
    # the kept state_dicts hold the live tensors: the last step's update writes them before
    # the file is written, so the resumed process starts step K+1 from its own result
    (tmp_path / "train.py").write_text(LATE_SAVE_JOB)
    case = resume_case(tmp_path, "late", steps=8, save_at=5, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(LATE_SAVE_JOB.splitlines(), 1) if "keep = {" in s)
    assert (v.location or "").split(" ")[0].endswith(f"train.py:{line}"), v.location
    assert "without a copy" in (v.location or "")
    proof = _proof(st)
    assert proof.data.interventions == ["restore-state model,optimizer"]
    assert proof.result == EvidenceResult.supported
