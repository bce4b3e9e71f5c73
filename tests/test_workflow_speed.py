"""`triage run` on a small real job (plain torch on CPU): the trace comparisons on worker
processes reach what the serial ones reach, the time per stage is printed, recorded and
returned, and a Ray that cannot be used stops the run before anything is launched."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from test_workflow_stage2 import SCOPED_FAILS

from triage_agent.compare.distributed import Executor, compare_paths
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind

TRIAGE = [sys.executable, "-m", "triage_agent.cli.app"]
REFUSAL = """cfg = os.environ.get("TRIAGE_CAPTURE_CONFIG")
if cfg and json.load(open(cfg)).get("scope"):
    sys.exit("this job cannot run under a scoped capture")
"""

# B's first layer computes differently from step 2 on: a module origin at step 2, then an
# op trace inside that module (the job of the stage-2 tests, without its refusal to run
# under a scoped capture).
NUDGED = SCOPED_FAILS.replace(REFUSAL, "")
assert NUDGED != SCOPED_FAILS


def _case(d: Path, b_flag: str = ', "--b"') -> Path:
    d.mkdir()
    (d / "train.py").write_text(NUDGED)
    runs = "".join(
        f'\n[runs.{r}]\nmetrics = "{{out}}"\n'
        f'launch = [["{{python}}", "train.py", "{{out}}"{arg}]]\n'
        for r, arg in (("a", ""), ("b", b_flag))
    )
    toml = d / "triage.toml"
    toml.write_text(
        '[case]\nname = "nudged"\nworkspace = "ws"\nsource_roots = ["."]\n'
        'scan_paths = ["train.py"]\ntimeout_s = 120.0\n' + runs
    )
    return toml


def _run(toml: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TRIAGE, "run", "--case", str(toml), "--no-report", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


def _trace_evidence(ws: Path) -> list[dict]:
    st = Ledger(ws).state()
    return [
        {"said": e.summary, **e.model_dump(mode="json")["data"]}
        for e in st.evidence
        if e.kind == EvidenceKind.trace_compare
    ]


def test_workers_reach_the_serial_verdict_and_evidence_and_stage_times_are_kept(tmp_path):
    from triage_agent.config import load_case
    from triage_agent.workflow.engine import run_workflow
    from triage_agent.workflow.options import RunOptions

    serial, workers = _case(tmp_path / "serial"), _case(tmp_path / "workers")
    # the serial run in this process, as the library is called: its result carries the
    # time per stage the ledger notes
    case = load_case(serial)
    res = run_workflow(case, Ledger(case.workspace), RunOptions())
    got = {s.stage: s for s in res.stages}
    assert got["baseline"].launches == 2 and got["baseline"].seconds > 0
    assert sum(s.seconds for s in res.stages) <= res.seconds + 1
    note1 = next(n for n in reversed(Ledger(case.workspace).state().notes) if "stages" in n)
    assert note1["stages"] == [s.model_dump() for s in res.stages]
    two = _run(workers, "--workers", "2")
    assert two.returncode == 0, two.stderr[-2000:]
    ws1, ws2 = serial.parent / "ws", workers.parent / "ws"
    v1, v2 = Ledger(ws1).state().verdict, Ledger(ws2).state().verdict
    assert v1 is not None and v2 is not None

    # locations name the job's call sites, under each case's own directory
    def here(text, case):
        return (text or "").replace(str(case.parent), "<case>")

    assert (v1.classification, here(v1.statement, serial), here(v1.location, serial)) == (
        v2.classification,
        here(v2.statement, workers),
        here(v2.location, workers),
    )
    t1, t2 = _trace_evidence(ws1), _trace_evidence(ws2)
    assert [here(t["origin_location"], serial) for t in t1] == [
        here(t["origin_location"], workers) for t in t2
    ]
    assert any(t["origin_location"] and "step 2" in t["origin_location"] for t in t1), t1
    # each comparison the workers made is the one a serial comparison makes of those traces
    for t in t2:
        dirs = t["trace_dirs"]
        serial_res = compare_paths(dirs["a"], dirs["b"])
        on_two = compare_paths(dirs["a"], dirs["b"], executor=Executor(workers=2))
        assert on_two.model_dump_json() == serial_res.model_dump_json()
        assert t["summary"] == serial_res.summary.model_dump(mode="json")
        assert t["complete"] == serial_res.complete
        assert len(t["unmatched"]) == sum(min(len(r.unmatched), 50) for r in serial_res.ranks)

    # the table printed at the end, the note in the ledger, and the same numbers in both
    assert "where the time went" in two.stdout
    note = next(n for n in reversed(Ledger(ws2).state().notes) if "stages" in n)
    stages = {s["stage"]: s for s in note["stages"]}
    assert {"baseline", "confirm", "stage 1", "stage 2", "verdict"} <= set(stages)
    # one command per run: two baselines, and each traced pair two more
    assert stages["baseline"]["launches"] == 2
    assert stages["stage 2"]["launches"] >= 4 and stages["stage 2"]["launches"] % 2 == 0
    assert stages["confirm"]["launches"] == 0
    table = two.stdout.split("where the time went", 1)[1].splitlines()
    rows = {c[0]: c[1:] for ln in table if len(c := [x.strip() for x in ln.split("│")][1:-1]) == 3}
    for s in note["stages"]:
        assert rows[s["stage"]] == [f"{s['seconds']:.1f}", str(s["launches"])], rows
    assert rows["total"][1] == str(sum(s["launches"] for s in note["stages"]))

    # a resumed run reuses everything: no launch at all, and says so
    again = _run(workers, "--workers", "2")
    assert again.returncode == 0, again.stderr[-2000:]
    last = next(n for n in reversed(Ledger(ws2).state().notes) if "stages" in n)
    assert last is not note and sum(s["launches"] for s in last["stages"]) == 0


def test_an_unusable_ray_is_one_line_before_any_launch(tmp_path):
    toml = _case(tmp_path / "c")
    ws = toml.parent / "ws"
    # nothing listens on port 1
    out = _run(toml, "--ray", "127.0.0.1:1")
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    if importlib.util.find_spec("ray") is not None:
        assert "cannot reach the Ray cluster at 127.0.0.1:1" in err
    else:  # Ray is an optional extra: without it the same line says how to install it
        assert "pip install bitwise-triage[ray]" in err
    assert not (ws / "runs").exists()
    # Ray not installed: the same, saying how to install it
    code = (
        "import sys; sys.modules['ray'] = None; sys.argv = ['triage'] + sys.argv[1:];"
        "from triage_agent.cli.app import main; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "run", "--case", str(toml), "--ray"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "pip install bitwise-triage[ray]" in err, err
    assert not (ws / "runs").exists()


def test_a_prefetched_fix_rerun_is_the_one_the_fix_check_uses(tmp_path):
    from triage_agent.config import load_case
    from triage_agent.records import Hypothesis
    from triage_agent.runs import launches_started, materialize_case
    from triage_agent.workflow.fixcheck import validate_fix
    from triage_agent.workflow.prefetch import Prefetch

    # B is A's command: under the policy it matches A at the first attempt (B only)
    case = load_case(_case(tmp_path / "c", b_flag=""))
    ledger = Ledger(case.workspace)
    base_a, _ = materialize_case(case)
    hyp = Hypothesis(statement="the RNG state is not restored", category="rng-state")
    other = Hypothesis(statement="a cast", category="casts")  # no policy: nothing started
    before = launches_started()
    pre = Prefetch()
    pre.fix_reruns(case, Path(case.workspace), [hyp, other, hyp], timeout_s=120)
    pre.wait()
    assert launches_started() == before + 1  # B's one command, once
    ev = validate_fix(case, ledger, "restore-rng", [hyp.id], base_a.metrics, timeout_s=120)
    assert launches_started() == before + 1, "the fix check launched B again"
    data = ev.model_dump(mode="json")["data"]
    assert data["rerun"]["cached"] is True and data["applied_to"] == "B only"
    assert ev.result.value == "supported"
