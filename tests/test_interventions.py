"""Interventions on real runs: each changes one thing, and only the right one makes B match A.

The job is a tiny plain-torch training script whose metric bits depend on an environment
variable, a key of its JSON config, a launch flag and a function of a helper module. Run B
differs from A in one of them; the intervention on that thing makes every step match, and an
intervention on something else does not. One test runs real DeepSpeed on one CPU rank.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from triage_agent.errors import InputError
from triage_agent.interventions import (
    ConfigIntervention,
    EnvIntervention,
    PolicyIntervention,
    ReplaceIntervention,
    RevertIntervention,
    StepMatch,
    SuppressIntervention,
    check_untrusted,
    compare_runs,
    describe,
    intervene,
    parse_intervention,
    rerun,
    to_text,
)
from triage_agent.ledger import Ledger
from triage_agent.metrics import MetricLog
from triage_agent.records import Case, EvidenceKind, EvidenceResult, RunSpec
from triage_agent.runs import RunOutcome, materialize, rerun_record

TRAIN = """
import argparse, json, os, torch
import toylib
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--config")
p.add_argument("--scale", type=float, default=1.0)
a = p.parse_args()
cfg = json.load(open(a.config)) if a.config else {}
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=cfg.get("optimizer", {}).get("lr", 0.1))
x = torch.randn(8, 4) * a.scale
jitter = float(os.environ.get("TOY_JITTER", "0"))
helper = toylib.Helper()
with MetricLog(a.out) as log:
    for step in range(5):
        loss = model(x).pow(2).mean() + jitter * 1e-3 * step
        opt.zero_grad()
        loss.backward()
        opt.step()
        toylib.adjust(model, step)
        helper.touch(model)
        log.log(step, loss=loss.detach())
"""

TOYLIB = """
import os
import torch


def adjust(model, step):
    if os.environ.get("TOY_ADJUST") and step == 1:
        with torch.no_grad():
            model.weight[0, 0] += 1e-3


def leave(model, step):
    return None


def never_called():
    raise RuntimeError("not on the job's path")


class Helper:
    def touch(self, model):
        return model

    @staticmethod
    def nudge(model):
        with torch.no_grad():
            model.bias += 1e-3
"""

CONFIG = {"optimizer": {"lr": 0.1}, "train_batch_size": 8}


def _project(root: Path, b_config: dict | None = None) -> Path:
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "train.py").write_text(TRAIN)
    (src / "toylib.py").write_text(TOYLIB)
    (src / "a.json").write_text(json.dumps(CONFIG))
    (src / "b.json").write_text(json.dumps(b_config or CONFIG))
    return src


def _case(tmp_path: Path, *, b_env=None, b_args=(), b_config=None, b_launch=None) -> Case:
    src = _project(tmp_path, b_config)
    base = ["{python}", "train.py", "--out", "{out}", "--config"]
    a = RunSpec(name="a", metrics="{out}", cwd=str(src), launch=[[*base, "a.json"]])
    b = RunSpec(
        name="b",
        metrics="{out}",
        cwd=str(src),
        env=b_env or {},
        launch=b_launch or [[*base, "b.json", *b_args]],
    )
    return Case(run_a=a, run_b=b, workspace=str(tmp_path / "ws"), timeout_s=120)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory) -> RunOutcome:
    """Run A is the same job in every case of this file (only B differs): launched once."""
    case = _case(tmp_path_factory.mktemp("run-a"))
    a = materialize(case.run_a, Path(case.workspace), "baseline", timeout_s=120)
    assert a.ok, a.error
    return a


def _check(case: Case, text: str, a: RunOutcome) -> StepMatch:
    ws = Path(case.workspace)
    out = rerun(case, "b", [parse_intervention(text)], workspace=ws, timeout_s=120)
    assert out.ok, out.error
    return compare_runs(case, a, out)


def _differs(case: Case, a: RunOutcome) -> int:
    ws = Path(case.workspace)
    b = materialize(case.run_b, ws, "baseline", timeout_s=120)
    m = compare_runs(case, a, b)
    assert not m.all_match and m.first_differing_step is not None, m
    return m.first_differing_step


# -- parsing -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "model", "said"),
    [
        ("env OMP_NUM_THREADS=2", EnvIntervention(key="OMP_NUM_THREADS", value="2"), "set OMP_NUM_THREADS=2"),
        ("env EMPTY=", EnvIntervention(key="EMPTY", value=""), "set EMPTY="),
        ("unset OMP_NUM_THREADS", EnvIntervention(key="OMP_NUM_THREADS", value=None), "unset OMP_NUM_THREADS"),
        ("config zero_optimization.stage=1", ConfigIntervention(key="zero_optimization.stage", value=1), "config key zero_optimization.stage = 1"),
        ("config optimizer.type=AdamW", ConfigIntervention(key="optimizer.type", value="AdamW"), 'config key optimizer.type = "AdamW"'),
        ("config --lr=0.1", ConfigIntervention(key="--lr", value="0.1"), "launch flag --lr=0.1"),
        ("suppress a.b:C.d", SuppressIntervention(target="a.b:C.d"), "a.b:C.d suppressed (returns None)"),
        ("replace a.b:f=c:g", ReplaceIntervention(target="a.b:f", replacement="c:g"), "a.b:f replaced by c:g"),
        ("thin a.b:C.d@t.py:54=4", SuppressIntervention(target="a.b:C.d", site="t.py:54", every=4), "a.b:C.d where t.py:54 calls it let through once in every 4 calls (the last of each 4; the others return None)"),
        ("thin a.b:f=2", SuppressIntervention(target="a.b:f", every=2), "a.b:f let through once in every 2 calls (the last of each 2; the others return None)"),
        ("restore-rng", PolicyIntervention(policy="restore-rng"), None),
        ("deterministic", PolicyIntervention(policy="deterministic"), None),
        ("revert lib/x.py, y.py", RevertIntervention(paths=["lib/x.py", "y.py"]), "lib/x.py, y.py reverted to the other run's revision"),
    ],
)  # fmt: skip
def test_parse_intervention_reads_every_form_and_writes_it_back(text, model, said):
    iv = parse_intervention(text)
    assert iv == model
    assert parse_intervention(to_text(iv)) == iv
    assert describe(iv) == said if said else describe(iv).startswith(f"policy {text}")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("bogus X=1", "unknown kind 'bogus'"),
        ("env OMP_NUM_THREADS", "expected env KEY=VALUE"),
        ("env 1BAD=2", "expected env KEY=VALUE"),
        ("unset", "expected unset KEY"),
        ("config =3", "expected config"),
        ("config a..b=1", "not a dotted key path"),
        ("config --=1", "not a launch flag"),
        ("suppress nocolon", "expected suppress"),
        ("suppress a:b c", "expected suppress"),
        ("replace a:b", "expected replace"),
        ("thin a.b:f", "expected thin"),
        ("thin a.b:f=x", "expected thin"),
        ("thin a.b:f@nowhere=3", "expected thin"),
        ("thin a.b:f=1", "greater than or equal to 2"),
        ("revert /etc/passwd", "repository-relative"),
        ("revert ../x.py", "repository-relative"),
        ("deterministic now", "unknown kind"),
    ],
)
def test_parse_intervention_refuses_bad_text_in_one_line(text, why):
    with pytest.raises(InputError, match=why) as e:
        parse_intervention(text)
    assert "\n" not in str(e.value)


def test_check_untrusted_refuses_code_loading_changes():
    for text in ("env LD_PRELOAD=/tmp/x.so", "env PYTHONPATH=/tmp", "env TRIAGE_PATCHES=/x"):
        with pytest.raises(InputError, match="selects code"):
            check_untrusted(parse_intervention(text))
    with pytest.raises(InputError, match="standard-library"):
        check_untrusted(parse_intervention("replace toylib:adjust=os:system"))
    ok = parse_intervention("replace toylib:adjust=toylib:leave")
    assert check_untrusted(ok) is ok


# -- real reruns -------------------------------------------------------------------------------
def test_env_intervention_makes_b_match_and_the_wrong_one_does_not(tmp_path, run_a):
    case = _case(tmp_path, b_env={"TOY_JITTER": "1"})
    first = _differs(case, run_a)
    assert first == 1
    wrong = _check(case, "env TOY_OTHER=1", run_a)
    assert not wrong.all_match and wrong.first_differing_step == first
    fixed = _check(case, "unset TOY_JITTER", run_a)
    assert fixed.all_match and fixed.steps == 5 and fixed.ranks == [0]
    assert fixed.said() == "all 5 steps match"


def test_config_key_intervention_edits_a_copy_of_the_json_the_argv_names(tmp_path, run_a):
    case = _case(tmp_path, b_config={**CONFIG, "optimizer": {"lr": 0.2}})
    assert _differs(case, run_a) == 1
    wrong = _check(case, "config optimizer.momentum=0", run_a)
    assert wrong.said() == "first differing step 1"
    assert _check(case, "config optimizer.lr=0.1", run_a).all_match
    # the user's file is untouched; the rerun's argv names the changed copy
    assert json.loads((Path(case.run_b.cwd) / "b.json").read_text())["optimizer"]["lr"] == 0.2
    out = rerun(
        case, "b", [parse_intervention("config optimizer.lr=0.1")], workspace=tmp_path / "ws"
    )
    assert out.cached
    named = Path(out.argv[0][out.argv[0].index("--config") + 1])
    assert named != Path(case.run_b.cwd) / "b.json"
    assert json.loads(named.read_text())["optimizer"]["lr"] == 0.1


def test_launch_flag_intervention_replaces_the_value_in_place(tmp_path, run_a):
    case = _case(tmp_path, b_args=("--scale", "2"))
    assert _differs(case, run_a) == 0
    assert _check(case, "config --scale=3", run_a).first_differing_step == 0
    fixed = _check(case, "config --scale=1", run_a)
    assert fixed.all_match
    out = rerun(case, "b", [parse_intervention("config --scale=1")], workspace=tmp_path / "ws")
    assert out.argv[0][-1] == "--scale=1" and "2" not in out.argv[0][-2:]


def test_suppress_and_replace_patch_a_function_of_a_module_imported_later(tmp_path, run_a):
    case = _case(tmp_path, b_env={"TOY_ADJUST": "1"})
    first = _differs(case, run_a)
    assert first == 2  # the weight is nudged after step 1's update
    ws = tmp_path / "ws"
    wrong = _check(case, "suppress toylib:Helper.touch", run_a)
    assert wrong.first_differing_step == first
    assert _check(case, "suppress toylib:adjust", run_a).all_match
    assert _check(case, "replace toylib:adjust=toylib:leave", run_a).all_match
    out = rerun(case, "b", [parse_intervention("suppress toylib:adjust")], workspace=ws)
    assert out.patches["toylib:adjust"] == {"patched": 1, "called": 1}
    assert "toylib:adjust suppressed (returns None)" in out.interventions
    # nothing in the user's source changed
    assert (Path(case.run_b.cwd) / "toylib.py").read_text() == TOYLIB


def test_a_patch_that_never_takes_effect_is_never_a_match(tmp_path, run_a):
    case = _case(tmp_path)  # B equals A: any rerun of B matches bit for bit
    m = _check(case, "suppress toylib:never_called", run_a)
    assert not m.all_match and m.first_differing_step is None
    assert "patched but never called" in m.note
    gone = _check(case, "suppress nosuchmodule_xyz:f", run_a)
    assert not gone.all_match and "never patched" in gone.note


def test_a_patch_naming_a_missing_function_fails_the_rerun_in_one_line(tmp_path):
    case = _case(tmp_path)
    out = rerun(case, "b", [parse_intervention("suppress toylib:nope")], workspace=tmp_path / "ws")
    assert not out.ok and "toylib has no nope" in out.error


def test_rerun_records_every_argv_the_summed_duration_and_provenance(tmp_path):
    case = _case(tmp_path)
    pause = ["{python}", "-c", "import time, sys; time.sleep(0.5)", "{out}"]
    train = ["{python}", "train.py", "--out", "{out}", "--config", "b.json"]
    case = case.model_copy(
        update={"run_b": case.run_b.model_copy(update={"launch": [pause, train]})}
    )
    out = rerun(case, "b", [parse_intervention("env OMP_NUM_THREADS=1")], workspace=tmp_path / "ws")
    assert out.ok, out.error
    assert len(out.argv) == 2 and all(isinstance(c, list) for c in out.argv)
    assert out.env_overrides == {"OMP_NUM_THREADS": "1"}
    assert len(out.launch_seconds) == 2 and out.launch_seconds[0] >= 0.5
    assert out.seconds == pytest.approx(sum(out.launch_seconds), abs=1e-3)
    assert out.provenance is not None and out.provenance.env["OMP_NUM_THREADS"] == "1"
    rec = rerun_record(out)
    assert rec.commands == out.argv and rec.launches == 2 and rec.seconds == out.seconds
    assert rec.env_overrides == {"b": {"OMP_NUM_THREADS": "1"}} and rec.provenance


def test_rerun_from_a_prepared_source_directory(tmp_path, run_a):
    case = _case(tmp_path, b_env={"TOY_ADJUST": "1"})
    first = _differs(case, run_a)
    fixed = tmp_path / "prepared"
    shutil.copytree(case.run_b.cwd, fixed)
    # the prepared copy holds the fix: adjust() no longer touches the weights
    (fixed / "toylib.py").write_text(TOYLIB.replace("model.weight[0, 0] += 1e-3", "pass"))
    ws = tmp_path / "ws"
    out = rerun(case, "b", [], workspace=ws, source_dir=fixed)
    assert out.ok and Path(out.cwd) == fixed.resolve()
    assert compare_runs(case, run_a, out).all_match
    # the same source, unchanged, is another rerun: the cache follows the directory's content
    same = tmp_path / "same"
    shutil.copytree(case.run_b.cwd, same)
    again = rerun(case, "b", [], workspace=ws, source_dir=same)
    assert not again.cached and compare_runs(case, run_a, again).first_differing_step == first
    revert = RevertIntervention(paths=["toylib.py"])
    recorded = rerun(case, "b", [revert], workspace=ws, source_dir=fixed)
    assert (
        recorded.ok and "toylib.py reverted to the other run's revision" in recorded.interventions
    )


def test_rerun_refuses_what_it_cannot_apply_before_launching(tmp_path):
    case = _case(tmp_path)
    ws = tmp_path / "ws"
    with pytest.raises(InputError, match="applied by the fix check"):
        rerun(case, "b", [parse_intervention("revert toylib.py")], workspace=ws)
    with pytest.raises(InputError, match="unknown run 'c'"):
        rerun(case, "c", [parse_intervention("deterministic")], workspace=ws)
    with pytest.raises(InputError, match="no intervention given"):
        rerun(case, "b", [], workspace=ws)
    twice = [parse_intervention("env X=1"), parse_intervention("unset X")]
    with pytest.raises(InputError, match="X is changed twice"):
        rerun(case, "b", twice, workspace=ws)
    (Path(case.run_b.cwd) / "b.json").unlink()
    with pytest.raises(InputError, match="b.json named in the run's argv"):
        rerun(case, "b", [parse_intervention("config optimizer.lr=1")], workspace=ws)
    bare = case.model_copy(
        update={
            "run_b": case.run_b.model_copy(
                update={"launch": [["{python}", "train.py", "--out", "{out}"]]}
            )
        }
    )
    with pytest.raises(InputError, match="names no JSON config file"):
        rerun(bare, "b", [parse_intervention("config optimizer.lr=1")], workspace=ws)
    (Path(case.run_b.cwd) / "b.json").write_text(json.dumps({"optimizer": 3}))
    with pytest.raises(InputError, match="inside a non-object"):
        rerun(case, "b", [parse_intervention("config optimizer.lr.x=1")], workspace=ws)
    assert not (ws / "runs" / "b").exists()  # nothing was launched


# -- comparing ---------------------------------------------------------------------------------
def _outcome(tmp_path: Path, name: str, ranks: dict[int, list[int]]) -> RunOutcome:
    d = tmp_path / name
    for rank, steps in ranks.items():
        with MetricLog(d, rank=rank) as log:
            for s in steps:
                log.log(s, loss=1.0 / (s + 1))
    return RunOutcome(
        run=name, label="x", out_dir=str(d), metrics=str(d), argv=[["x"]], exit_codes=[0]
    )


def test_compare_runs_never_calls_a_missing_rank_or_step_a_match(tmp_path):
    case = _case(tmp_path)
    full = _outcome(tmp_path, "full", {0: [0, 1, 2], 1: [0, 1, 2]})
    assert compare_runs(
        case, full, _outcome(tmp_path, "same", {0: [0, 1, 2], 1: [0, 1, 2]})
    ).all_match
    one_rank = compare_runs(case, full, _outcome(tmp_path, "r0", {0: [0, 1, 2]}))
    assert not one_rank.all_match and "ranks only in A: [1]" in one_rank.note
    short = compare_runs(case, full, _outcome(tmp_path, "short", {0: [0, 1], 1: [0, 1]}))
    assert (
        not short.all_match
        and short.first_differing_step is None
        and "steps only in A" in short.note
    )
    # a rank missing one step the others have differs at that step
    hole = compare_runs(case, full, _outcome(tmp_path, "hole", {0: [0, 1, 2], 1: [0, 2]}))
    assert not hole.all_match and hole.first_differing_step == 1
    failed = full.model_copy(update={"exit_codes": [1], "error": "boom"})
    assert compare_runs(case, full, failed).note == "run full failed: boom"


# -- recorded evidence -------------------------------------------------------------------------
def test_intervene_records_rerun_evidence_with_its_commands(tmp_path):
    case = _case(tmp_path, b_env={"TOY_JITTER": "1"})
    ledger = Ledger(case.workspace)
    from triage_agent.records import Hypothesis

    hyp = ledger.put_hypothesis(
        Hypothesis(statement="TOY_JITTER changes the loss", category="environment")
    )
    res = intervene(
        case, "b", [parse_intervention("unset TOY_JITTER")], ledger=ledger, hypotheses=[hyp.id]
    )
    assert res.line == "all 5 steps match" and res.result == EvidenceResult.supported
    ev = ledger.state().evidence[-1]
    assert ev.id == res.evidence_id and ev.kind == EvidenceKind.rerun and ev.hypotheses == [hyp.id]
    assert ev.data.rerun["commands"] == res.outcome.argv
    assert ev.data.rerun["env_overrides"] == {"b": {"TOY_JITTER": None}}
    assert ev.data.changed == ["unset TOY_JITTER"] and ev.provenance is not None
    assert ev.duration_s == res.outcome.seconds and ev.artifacts
    wrong = intervene(
        case, "b", [parse_intervention("env TOY_OTHER=1")], ledger=ledger, hypotheses=[hyp.id]
    )
    assert wrong.result == EvidenceResult.refuted and wrong.line == "first differing step 1"
    bare = intervene(case, "b", [parse_intervention("env TOY_OTHER=1")], ledger=ledger)
    assert bare.result == EvidenceResult.observed
    with pytest.raises(InputError, match="unknown hypothesis"):
        intervene(
            case, "b", [parse_intervention("deterministic")], ledger=ledger, hypotheses=["H-no"]
        )


# -- real DeepSpeed, one CPU rank --------------------------------------------------------------
DS_TRAIN = """
import argparse, deepspeed, torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--local_rank", type=int, default=0)
p = deepspeed.add_config_arguments(p)
a = p.parse_args()
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
engine, *_ = deepspeed.initialize(args=a, model=model, model_parameters=model.parameters())
x = torch.randn(4, 8)
with MetricLog(a.out, rank=0) as log:
    for step in range(3):
        loss = engine(x).pow(2).mean()
        engine.backward(loss)
        engine.step()
        log.log(step, loss=loss.detach())
torch.distributed.destroy_process_group()
"""


def _ds_config(stage: int, clip: float) -> dict:
    return {
        "train_batch_size": 4,
        "train_micro_batch_size_per_gpu": 4,
        "gradient_clipping": clip,
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,
        "optimizer": {"type": "SGD", "params": {"lr": 0.5}},
    }


@pytest.mark.skipif(shutil.which("deepspeed") is None, reason="deepspeed launcher not on PATH")
def test_deepspeed_config_key_intervention_on_one_cpu_rank(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(textwrap.dedent(DS_TRAIN))
    (src / "a.json").write_text(json.dumps(_ds_config(0, 1.0)))
    (src / "b.json").write_text(json.dumps(_ds_config(1, 1e-4)))
    cmd = [
        "{bin}/deepspeed",
        "--num_gpus=1",
        "train.py",
        "--out",
        "{out}",
        "--deepspeed",
        "--deepspeed_config",
    ]
    case = Case(
        run_a=RunSpec(name="a", metrics="{out}", cwd=str(src), launch=[[*cmd, "a.json"]]),
        run_b=RunSpec(name="b", metrics="{out}", cwd=str(src), launch=[[*cmd, "b.json"]]),
        workspace=str(tmp_path / "ws"),
        timeout_s=300,
    )
    ivs = [
        parse_intervention(t)
        for t in ("config zero_optimization.stage=0", "config gradient_clipping=1.0")
    ]
    res = intervene(case, "b", ivs, ledger=Ledger(case.workspace))
    assert res.outcome.ok and res.baseline.ok, res.outcome.error or res.baseline.error
    assert res.match.all_match and res.line == "all 3 steps match", res.match
    named = res.outcome.argv[0][-1]
    assert json.loads(Path(named).read_text())["zero_optimization"]["stage"] == 0
    # without the intervention B does differ from A
    b = materialize(case.run_b, Path(case.workspace), "baseline", timeout_s=300)
    assert compare_runs(case, res.baseline, b).first_differing_step == 1


def test_patches_keep_the_method_kind_and_wait_for_their_module(tmp_path, monkeypatch):
    import sys

    from triage_agent.policies import FunctionPatch, PatchFile, apply_patches, patch_events

    (tmp_path / "late_mod_xyz.py").write_text(
        "class K:\n"
        "    def inst(self, x):\n        return ('inst', x)\n"
        "    @staticmethod\n    def stat(x):\n        return ('stat', x)\n"
        "    @classmethod\n    def klass(cls, x):\n        return ('klass', cls.__name__, x)\n"
        "def other(*args):\n    return ('other', len(args))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    report = tmp_path / "report.jsonl"
    spec = PatchFile(
        patches=[
            FunctionPatch(target="late_mod_xyz:K.inst"),
            FunctionPatch(target="late_mod_xyz:K.stat", replacement="late_mod_xyz:other"),
            FunctionPatch(target="late_mod_xyz:K.klass", replacement="late_mod_xyz:other"),
        ],
        report=str(report),
    )
    before = list(sys.meta_path)
    try:
        apply_patches(spec)
        assert "late_mod_xyz" not in sys.modules  # nothing imported ahead of the job
        import late_mod_xyz

        k = late_mod_xyz.K()
        assert k.inst(1) is None
        assert k.stat(1) == ("other", 1) and late_mod_xyz.K.stat(1) == ("other", 1)
        assert late_mod_xyz.K.klass(1) == ("other", 2)  # the class is still passed first
        events = patch_events(report)
        assert events["late_mod_xyz:K.inst"] == {"patched": 1, "called": 1}
        assert set(events) == {f"late_mod_xyz:K.{n}" for n in ("inst", "stat", "klass")}
    finally:
        sys.meta_path[:] = before
        sys.modules.pop("late_mod_xyz", None)


def test_a_function_of_the_main_script_is_refused_with_the_way_out():
    with pytest.raises(InputError, match="name the module it is defined in"):
        parse_intervention("suppress __main__:train_step")


# -- the CLI -----------------------------------------------------------------------------------
CASE_TOML = """
[case]
name = "toy"
timeout_s = 120

[runs.a]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "--out", "{out}", "--config", "a.json"]]

[runs.b]
metrics = "{out}"
cwd = "src"
env = { TOY_JITTER = "1" }
launch = [["{python}", "train.py", "--out", "{out}", "--config", "b.json"]]
"""


def _triage(root: Path, *args: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "rerun", "--case", "triage.toml", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_rerun_prints_one_line_and_records_the_evidence(tmp_path):
    _project(tmp_path)
    (tmp_path / "triage.toml").write_text(CASE_TOML)
    ok = _triage(tmp_path, "--run", "b", "--intervene", "unset TOY_JITTER")
    assert ok.returncode == 0, ok.stderr
    (line,) = ok.stdout.strip().splitlines()
    assert line.startswith("run b with unset TOY_JITTER: all 5 steps match against a")
    wrong = _triage(tmp_path, "--run", "b", "-i", "env TOY_OTHER=1", "-i", "deterministic")
    assert wrong.returncode == 1 and "first differing step 1" in wrong.stdout
    ev = Ledger(tmp_path / ".triage").state().evidence
    assert [e.kind for e in ev] == [EvidenceKind.rerun, EvidenceKind.rerun]
    assert ev[1].data.changed[0] == "set TOY_OTHER=1" and ev[1].result == EvidenceResult.observed
    for args, said in (
        (["-i", "bogus X=1"], "unknown kind 'bogus'"),
        (["-i", "config a..b=1"], "not a dotted key path"),
        (["-i", "thin toylib:adjust=0"], "greater than or equal to 2"),
        (["-i", "revert toylib.py"], "applied by the fix check"),
        ([], "no intervention"),
    ):
        bad = _triage(tmp_path, "--run", "b", *args)
        assert bad.returncode == 2 and said in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    (tmp_path / "src" / "b.json").unlink()
    gone = _triage(tmp_path, "--run", "b", "-i", "config optimizer.lr=0.1")
    assert gone.returncode == 2 and "b.json named in the run's argv" in gone.stderr
    assert "Traceback" not in gone.stderr
    assert len(Ledger(tmp_path / ".triage").state().evidence) == 2  # nothing lost or added


def test_seed_rng_makes_a_call_draw_by_its_arguments_and_puts_the_streams_back(
    tmp_path, monkeypatch
):
    import random
    import sys

    import numpy as np
    import torch

    from triage_agent.policies import FunctionPatch, PatchFile, apply_patches

    (tmp_path / "draws_mod_xyz.py").write_text(
        "import random\nimport numpy as np\nimport torch\n"
        "class Data:\n"
        "    def item(self, index, scale=1.0):\n"
        "        return (torch.randn(3) * scale, float(np.random.rand()), random.random())\n"
        "    def mask(self, x):\n"
        "        return torch.rand_like(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert (
        parse_intervention("seed-rng draws_mod_xyz:Data.item").target == "draws_mod_xyz:Data.item"
    )
    spec = PatchFile(
        patches=[
            FunctionPatch(target="draws_mod_xyz:Data.item", seed_rng=True),
            FunctionPatch(target="draws_mod_xyz:Data.mask", seed_rng=True),
        ],
        report=str(tmp_path / "report.jsonl"),
    )
    before = list(sys.meta_path)
    try:
        apply_patches(spec)
        import draws_mod_xyz

        torch.manual_seed(0)
        first = draws_mod_xyz.Data().item(7)
        state = torch.get_rng_state()
        torch.randn(100)  # another process, another order: the global stream elsewhere
        np.random.rand(5)
        random.random()
        again = draws_mod_xyz.Data().item(7)  # another object, the same call
        other = draws_mod_xyz.Data().item(8)
        assert torch.equal(first[0], again[0]) and first[1:] == again[1:]
        assert not torch.equal(first[0], other[0])
        torch.manual_seed(0)
        draws_mod_xyz.Data().item(7)
        assert torch.equal(torch.get_rng_state(), state)  # the caller's stream is untouched
        # a call named by nothing plain (a tensor, self) is not given one seed for every
        # call: it is named by its place among the calls, so each call draws anew, from a
        # seed of its own, and the caller's stream is put back after it
        x = torch.zeros(4)
        assert not torch.equal(draws_mod_xyz.Data().mask(x), draws_mod_xyz.Data().mask(x))
        state = torch.get_rng_state()
        draws_mod_xyz.Data().mask(x)
        assert torch.equal(torch.get_rng_state(), state)
    finally:
        sys.meta_path[:] = before
        sys.modules.pop("draws_mod_xyz", None)
