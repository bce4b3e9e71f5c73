"""A proven setting read further from the op trace of the two runs: the same arithmetic in
another order is a policy at the setting; a scalar that changes with the setting is a bug at
the code that computes it. Real small jobs (plain torch on CPU), built here, unlike the
corpus cases in names and code."""

from __future__ import annotations

from pathlib import Path

from triage_agent.ledger import Ledger
from triage_agent.records import Case, RunSpec
from triage_agent.workflow.engine import run_workflow
from triage_agent.workflow.options import RunOptions
from triage_agent.workflow.setting_effect import is_arithmetic, state_write_behind

# An RMS-normalised MLP: --rms-form says how the root mean square is formed (the root of a
# mean of squares, or a norm divided by the root of the width), the same quantity rounded
# otherwise.
RMS = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--rms-form", default="mean")
a = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(3)
w1, w2 = torch.nn.Linear(20, 30), torch.nn.Linear(30, 1)
opt = torch.optim.SGD([*w1.parameters(), *w2.parameters()], lr=0.05)


def rms(h):
    if a.rms_form == "mean":
        return h.pow(2).mean(-1, keepdim=True).sqrt()
    return h.norm(dim=-1, keepdim=True).div(h.shape[-1] ** 0.5)


with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(16, 20, generator=g)
        h = w1(x)
        loss = w2(h / rms(h)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""

# A hand-written SGD with a linear warm-up over parameter shards: its call counter advances
# once per shard instead of once per step, so --shards 2 warms the second shard up faster.
WARMUP = """class WarmupSGD:
    def __init__(self, shards, lr, warmup):
        self.shards = [list(s) for s in shards]
        self.lr, self.warmup = lr, warmup
        self.calls = 0

    def step(self):
        for shard in self.shards:
            self.calls += 1
            scale = min(1.0, self.calls / self.warmup)
            for p in shard:
                p.data.add_(p.grad, alpha=-self.lr * scale)
                p.grad = None
"""

SHARDS = """import argparse
import torch
from triage_agent.metrics import MetricLog
from warmup import WarmupSGD

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--shards", type=int, default=1)
a = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(5)
enc, dec = torch.nn.Linear(10, 12), torch.nn.Linear(12, 3)
params = [*enc.parameters(), *dec.parameters()]
shards = [params] if a.shards == 1 else [params[:2], params[2:]]
opt = WarmupSGD(shards, lr=0.1, warmup=10)
with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(8, 10, generator=g)
        loss = dec(torch.tanh(enc(x))).pow(2).mean()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def _case(tmp_path: Path, files: dict[str, str], flag: str, a: str, b: str) -> Case:
    src = tmp_path / "src"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)

    def run(name: str, value: str) -> RunSpec:
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(src),
            env={"OMP_NUM_THREADS": "1"},
            launch=[["{python}", "train.py", "--out", "{out}", flag, value]],
        )

    return Case(
        name="setting",
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a", a),
        run_b=run("b", b),
        timeout_s=120,
    )


def test_a_setting_that_reorders_the_same_arithmetic_is_a_policy(tmp_path):
    case = _case(tmp_path, {"train.py": RMS}, "--rms-form", "mean", "norm")
    ledger = Ledger(case.workspace)
    v = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=10)).verdict
    assert v.classification.value == "policy-difference", v
    assert (v.location or "").startswith("config:--rms-form"), v.location
    hyp = ledger.state().hypotheses[v.hypothesis]
    assert hyp.category == "config-policy"
    assert "reorders or regroups the same arithmetic" in hyp.statement


def test_a_setting_that_changes_a_scalar_is_a_bug_where_the_scalar_is_computed(tmp_path):
    case = _case(tmp_path, {"train.py": SHARDS, "warmup.py": WARMUP}, "--shards", "1", "2")
    ledger = Ledger(case.workspace)
    v = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=10)).verdict
    assert v.classification.value == "bug", v
    # the counter advanced in the shard loop, not the flag and not the op's own line
    assert (v.location or "").startswith("warmup.py:9 "), v.location
    assert "config:--shards" not in (v.location or "")
    # the first update lies in step 0, before the first differing metric (step 1)
    assert "step 0" in ledger.state().hypotheses[v.hypothesis].statement


def test_the_state_write_behind_a_call_site_is_the_one_its_values_depend_on(tmp_path):
    f = tmp_path / "w.py"
    f.write_text(WARMUP)
    write, n = state_write_behind(str(f), 12)
    assert n == 1 and write is not None
    assert (write.line, write.function, write.text) == (9, "step", "self.calls += 1")
    # two counters feeding the value: which one is meant is not read
    two = WARMUP.replace(
        "            scale = min(1.0, self.calls / self.warmup)\n",
        "            self.seen = self.calls * 2\n"
        "            scale = min(1.0, self.seen / self.warmup)\n",
    )
    f.write_text(two)
    assert state_write_behind(str(f), 13) == (None, 2)
    # a counter advanced in another method: where is not read in this one
    elsewhere = WARMUP.replace("            self.calls += 1\n", "            self.tick()\n")
    f.write_text(elsewhere)
    assert state_write_behind(str(f), 12) == (None, -1)
    # from locals and arguments alone: the call site itself
    f.write_text(
        "def step(params, k):\n"
        "    for i, p in enumerate(params):\n"
        "        scale = (i + 1) / k\n"
        "        p.add_(p.grad, alpha=-scale)\n"
    )
    assert state_write_behind(str(f), 4) == (None, 0)


def test_draws_and_scatters_are_not_arithmetic_reorderings():
    assert is_arithmetic("aten::div_.Tensor") and is_arithmetic("aten::_foreach_norm.Scalar")
    assert not is_arithmetic("aten::bernoulli_.float")
    assert not is_arithmetic("aten::index_add_")
    assert not is_arithmetic("aten::randperm")


def test_collectives_that_sum_or_copy_the_ranks_buffers_are_arithmetic():
    # a gradient all-reduced in another dtype or bucket is the same sum, associated otherwise
    assert is_arithmetic("c10d::allreduce_") and is_arithmetic("c10d::_reduce_scatter_base_")
    assert is_arithmetic("c10d::allgather_") and is_arithmetic("c10d::broadcast_")
    assert not is_arithmetic("c10d::barrier") and not is_arithmetic("c10d::recv_")


def test_a_scalar_from_an_object_the_line_calls_is_not_placed_at_that_line(tmp_path):
    from triage_agent.workflow.setting_effect import object_call

    src = tmp_path / "loop.py"
    src.write_text(
        "import torch\n"
        "\n"
        "\n"
        "def run(opt, p, k, m, v):\n"
        "    opt.step()\n"
        "    p.mul_(k)\n"
        "    torch.add(p, k)\n"
        "    p.addcdiv_(m, v.sqrt().div_(2.0).add_(1.0), value=-k)\n"
    )
    # the optimizer's op runs inside opt.step(): its scalar is the optimizer's state
    assert object_call(str(src), 5, "aten::mul_.Tensor") == "opt.step"
    # a line that issues the op itself, directly or nested, is the op's own place
    assert object_call(str(src), 6, "aten::mul_.Tensor") is None
    assert object_call(str(src), 7, "aten::add.Tensor") is None
    assert object_call(str(src), 8, "aten::div_.Tensor") is None


# A bf16 MLP whose --pool flag says whether the batch mean of the last activations is
# accumulated in bfloat16 (narrow) or in float32 (wide): the same quantity at another precision, which moves
# a float32 loss by far more than 64 of its own ulps and by a fraction of a bfloat16 ulp.
BF16_SUM = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--pool", default="narrow")
a = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(8)
w1, w2 = torch.nn.Linear(64, 96), torch.nn.Linear(96, 1)
opt = torch.optim.SGD([*w1.parameters(), *w2.parameters()], lr=0.05)

with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(256, 64, generator=g)
        h = torch.tanh(w1(x)).to(torch.bfloat16)
        wide = torch.float32 if a.pool == "wide" else torch.bfloat16
        pooled = h.to(wide).sum(0) / h.shape[0]
        loss = w2(pooled.float()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_a_setting_that_sums_in_another_precision_is_a_policy_beyond_fp32_rounding(tmp_path):
    case = _case(tmp_path, {"train.py": BF16_SUM}, "--pool", "narrow", "wide")
    ledger = Ledger(case.workspace)
    v = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=10)).verdict
    assert v.classification.value == "policy-difference", v
    assert (v.location or "").startswith("config:--pool"), v.location
    hyp = ledger.state().hypotheses[v.hypothesis]
    assert "rounding of bfloat16" in hyp.statement, hyp.statement


def test_rounding_is_measured_in_the_narrowest_dtype_the_differing_ops_compute_in():
    from triage_agent.workflow.setting_effect import ROUNDING_ULPS, rounding_bound

    assert rounding_bound([]) == (ROUNDING_ULPS, "float32")
    assert rounding_bound(["float32", "int64"]) == (ROUNDING_ULPS, "float32")
    assert rounding_bound(["float32", "bfloat16"]) == (ROUNDING_ULPS * 2**16, "bfloat16")
    assert rounding_bound(["float16"]) == (ROUNDING_ULPS * 2**13, "float16")
    assert rounding_bound(["float64"]) == (ROUNDING_ULPS, "float64")
