"""Replicas that part: a parameter left out of data-parallel synchronisation, found from the
optimizer events both traced runs already hold and proven by averaging its gradient."""

from __future__ import annotations

from pathlib import Path

from test_workflow_support import triage

from triage_agent.ledger_view import verdict_basis
from triage_agent.records import Case, RunSpec

TRAIN = """import argparse, os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from triage_agent.metrics import MetricLog
import comm

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--lean-sync", action="store_true")
args = p.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


net = Net()
if args.lean_sync:
    comm.lean(net)
model = DDP(net)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with MetricLog(args.out, rank=rank) as log:
    for step in range(4):
        g = torch.Generator().manual_seed(100 * step + rank)
        x = torch.randn(8, 6, generator=g)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach(), w=net.head.bias.detach().sum())
dist.barrier()
dist.destroy_process_group()
"""

COMM = '''"""Less traffic: biases are small and move little, so each rank keeps its own."""

from torch.nn.parallel import DistributedDataParallel


def lean(model):
    names = [n for n, _ in model.named_parameters() if n.endswith("bias")]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, names)
'''


def _ddp_case(tmp_path: Path, name: str, files: dict[str, str], b_flag: str) -> Case:
    """Runs A and B of ``train.py`` (beside ``files``) on two gloo ranks under torchrun; B
    gets ``b_flag``."""
    src = tmp_path / "src"
    src.mkdir()
    for file, text in files.items():
        (src / file).write_text(text)

    def run(run_name: str, *flags: str) -> RunSpec:
        launch = ["{python}", "-m", "torch.distributed.run", "--standalone"]
        launch += ["--nproc-per-node", "2", "train.py", "--out", "{out}", *flags]
        return RunSpec(name=run_name, metrics="{out}", cwd=str(src), launch=[launch])

    return Case(
        name=name,
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a"),
        run_b=run("b", b_flag),
        timeout_s=180,
    )


def test_a_parameter_left_out_of_ddp_sync_is_averaged_back_and_named_where_it_was_left_out(
    tmp_path,
):
    result, st = triage(
        _ddp_case(tmp_path, "lean-sync", {"train.py": TRAIN, "comm.py": COMM}, "--lean-sync")
    )
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    # the line that hands DDP the names to leave out, not the flag that reaches it
    assert "comm.py:8" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    (iv,) = proof.data.interventions
    assert iv.startswith("sync-grads ") and set(iv.split(" ", 1)[1].split(",")) == {
        "body.bias",
        "head.bias",
    }
    hyp = st.hypotheses[v.hypothesis]
    assert "ranks hold different copies" in hyp.statement and "run A's ranks agree" in (
        hyp.statement
    )


ACCUM = '''"""Accumulation over micro-batches, all-reducing only on the last one."""

import contextlib


def fit(model, opt, batches, every, fast):
    for k, x in enumerate(batches):
        closing = (k + 1) % every == 0
        skip = (k % every != 0) if fast else not closing
        with model.no_sync() if skip else contextlib.nullcontext():
            model(x).pow(2).mean().div(every).backward()
        if closing:
            opt.step()
            opt.zero_grad()
            yield k // every
'''

ACCUM_TRAIN = """import argparse
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from triage_agent.metrics import MetricLog
import accum

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--fast", action="store_true")
args = p.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
model = DDP(net)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(4, 6, generator=torch.Generator().manual_seed(10 * i + rank))
           for i in range(9)]
with MetricLog(args.out, rank=rank) as log:
    for step in accum.fit(model, opt, batches, 3, args.fast):
        log.log(step, w=net[2].weight.detach().sum())
dist.barrier()
dist.destroy_process_group()
"""


def test_a_step_whose_last_backward_ran_in_no_sync_is_named_where_no_sync_is_entered(tmp_path):
    case = _ddp_case(
        tmp_path, "no-sync-window", {"train.py": ACCUM_TRAIN, "accum.py": ACCUM}, "--fast"
    )
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "accum.py:10 (enters DDP's no_sync" in (v.location or ""), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.data.interventions[0].startswith("sync-grads ")
