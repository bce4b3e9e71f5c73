"""restore-rng reaches a job that checkpoints with its own code: the streams are saved at each
step the job logs and restored when a resumed process opens its log. A real small job, built
here, whose checkpoint holds the weights and the step but no RNG stream."""

from __future__ import annotations

from triage_agent.interventions import compare_runs, parse_intervention, rerun
from triage_agent.records import Case, RunSpec
from triage_agent.runs import materialize_case

TRAIN = """import argparse
import os

import torch

from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--last", type=int, default=5)
p.add_argument("--resume", action="store_true")
args = p.parse_args()
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
ckpt = os.path.join(args.out, "ckpt.pt")
first, resumed = 0, None
if args.resume:
    saved = torch.load(ckpt)
    model.load_state_dict(saved["model"])
    resumed = saved["step"]
    first = resumed + 1
x = torch.linspace(-1, 1, 48).reshape(8, 6)
with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
    for step in range(first, args.last + 1):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
torch.save({"model": model.state_dict(), "step": args.last}, ckpt)
"""


def test_restore_rng_brings_back_the_streams_of_a_job_with_its_own_checkpoint(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    cmd = ["{python}", "train.py", "{out}"]
    spec = {"metrics": "{out}", "cwd": str(tmp_path)}
    case = Case(
        name="own-checkpoint",
        workspace=str(tmp_path / "ws"),
        run_a=RunSpec(name="a", launch=[cmd], **spec),
        run_b=RunSpec(name="b", launch=[[*cmd, "--last", "2"], [*cmd, "--resume"]], **spec),
        timeout_s=120,
    )
    a, b = materialize_case(case, tmp_path / "ws")
    before = compare_runs(case, a, b)
    assert before.first_differing_step == 3, before  # the dropout masks after the resume
    fixed = rerun(case, "b", [parse_intervention("restore-rng")], workspace=tmp_path / "ws")
    assert fixed.ok, fixed.error
    after = compare_runs(case, a, fixed)
    assert after.all_match and after.steps == 6, after
