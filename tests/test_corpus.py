"""The corpus of real divergence cases (tests/cases/<name>/): every case is well formed, and
its ground truth holds.

Ground truth, per case: runs A and B, uninstrumented, differ in their metric bits first at
the expected step (or the expected run crashes); then the case's intervention, applied to one
run, makes every step of every rank match the other run bit for bit. The CPU cases with
``ci = true`` run here; the other CPU cases run with ``TRIAGE_CORPUS=all`` (and in
``benchmarks/accuracy.py``); the GPU cases are marked ``gpu``.
"""

from __future__ import annotations

import os
import re
import time
import tomllib
from pathlib import Path

import pytest
from cases.corpus import CorpusCase, devices_needed, discover, stage

from triage_agent.config import load_case
from triage_agent.interventions import RevertIntervention
from triage_agent.metrics import diff_metrics, load_metrics
from triage_agent.records import Case
from triage_agent.runs import RunOutcome, completed_despite_exit, materialize_case

CASES = discover()
FULL = os.environ.get("TRIAGE_CORPUS") == "all"


def _param(case: CorpusCase) -> pytest.param:
    marks = [pytest.mark.slow] if "deepspeed" in (case.dir / "triage.toml").read_text() else []
    if case.expected.gpu:
        marks.append(pytest.mark.gpu)
    elif not (case.expected.ci or FULL):
        marks.append(pytest.mark.skip(reason="outside the CI subset: TRIAGE_CORPUS=all runs it"))
    return pytest.param(case, id=case.name, marks=marks)


def test_the_corpus_covers_the_catalogue():
    kinds = {c.expected.kind for c in CASES}
    classes = {c.expected.classification for c in CASES}
    assert len(CASES) >= 16, [c.name for c in CASES]
    assert {"bug", "policy-difference", "environment"} <= classes
    assert any(c.expected.failing_run for c in CASES), "no case where a run itself fails"
    assert len({c.name for c in CASES if c.expected.gpu}) >= 4
    assert len(kinds) >= 8, kinds
    ci_deepspeed = [
        c.name
        for c in CASES
        if c.expected.ci and "deepspeed" in (c.dir / "triage.toml").read_text()
    ]
    assert 1 <= len(ci_deepspeed) <= 6, ci_deepspeed


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_loads_and_its_case_file_does_not_name_the_answer(case, tmp_path):
    exp = case.expected  # validated against the schema by discover()
    text = (case.dir / "triage.toml").read_text()
    raw = tomllib.loads(text)
    assert "expected" not in raw and set(raw) == {"case", "runs"}
    loaded = load_case(case.dir / "triage.toml")
    assert loaded is not None and loaded.name == case.name
    for run in (loaded.run_a, loaded.run_b):
        assert run.launch and "{out}" in (run.metrics or ""), run.name
    # a suppressed or replaced call, or a file of the answer, must not appear in the case file
    verb, _, target = exp.intervention.partition(" ")
    if verb in ("suppress", "replace"):
        qual = target.split("=", 1)[0].split(":")[-1]
        assert qual.split(".")[-1] not in text, qual
    where = exp.location.split(":")[0]
    if exp.is_file_line and not (case.dir / where).exists():  # a framework's file
        assert Path(where).name not in text, where
    if case.builds:
        staged = load_case(stage(case, tmp_path))
        assert staged is not None and Path(staged.run_b.cwd).is_dir()


def _steps(outcome: RunOutcome) -> dict[int, set[int]]:
    run = load_metrics(outcome.metrics)
    return {r: set(rm.steps) for r, rm in run.ranks.items()}


def _reverted_checkout(case: Case, iv: RevertIntervention, ws: Path) -> Path:
    """B's checkout with the files taken back to A's revision, as the fix check builds it."""
    from triage_agent.workflow.fixcheck import _revert_variant

    _revert_variant(case, ws, iv.paths, "ground-truth")
    return ws / "variants" / "ground-truth"


def _ground_truth(case: CorpusCase, tmp_path: Path) -> None:
    from triage_agent.interventions import compare_runs, describe, parse_intervention, rerun

    exp = case.expected
    t0 = time.monotonic()
    loaded = load_case(stage(case, tmp_path, with_answer=True))
    ws = tmp_path / "ws"
    a, b = materialize_case(loaded, ws, check=False)
    by_run = {"a": a, "b": b}
    failing = exp.failing_run
    for name, out in by_run.items():
        if name == failing:
            assert not out.ok, f"run {name} was expected to fail and completed"
            kind = "ran past" if exp.outcome.startswith("hang") else "exited"
            assert kind in (out.error or ""), out.error
        else:
            assert out.ok, out.error
    if failing is None:
        diff = diff_metrics(load_metrics(a.metrics), load_metrics(b.metrics))
        assert diff.complete, diff.gaps()
        if exp.gpu:
            # which kernel a GPU library picks, and when an atomic's order first flips a bit,
            # depend on the device and its software: the bits must differ, the step may move
            assert diff.first_step is not None, "the runs agree bit for bit on this GPU"
            print(f"\n{case.name}: first differing step {diff.first_step} on this GPU")
        elif exp.classification in ("policy-difference", "environment"):
            # the same quantity rounded another way: on another CPU's vector width the first
            # flipped bit may reach the logged metrics a step later, never earlier
            assert diff.first_step is not None, "the runs agree bit for bit on this CPU"
            assert diff.first_step >= exp.first_divergence_step, diff.mismatches[:3]
        else:
            assert diff.first_step == exp.first_divergence_step, diff.mismatches[:3]
    elif Path(by_run[failing].metrics).exists():
        # what the failing run logged before it stopped matches, up to the expected step
        logged = _steps(by_run[failing])
        assert all(s < exp.first_divergence_step for st in logged.values() for s in st), logged

    iv = parse_intervention(exp.intervention)
    source = _reverted_checkout(loaded, iv, ws) if isinstance(iv, RevertIntervention) else None
    # a rank that aborts in gloo's teardown after writing every step it was asked for is a
    # completed run with an abnormal exit, as the workflow counts it; nothing more is let by
    fixed = {
        name: completed_despite_exit(
            rerun(loaded, name, [iv], workspace=ws, timeout_s=loaded.timeout_s, source_dir=source),
            by_run[name],
        )
        for name in (("a", "b") if exp.run == "both" else (exp.run,))
    }
    for name, out in fixed.items():
        assert out.ok, f"{describe(iv)} on run {name}: {out.error}"
    # a run against its repeat whose difference is uncontrolled (a process id, a clock) has
    # no baseline to match: the intervention is applied to both, and the two must agree
    pair = (fixed.get("a", by_run["a"]), fixed.get("b", by_run["b"]))
    other = pair[0] if exp.run != "a" else pair[1]
    match = compare_runs(loaded, *pair)
    assert match.all_match, f"{describe(iv)}: {match.said()} ({match.note})"
    assert match.steps == len(set().union(*_steps(other).values()))
    assert match.ranks == sorted(_steps(other))
    print(f"\nground truth {case.name}: {time.monotonic() - t0:.1f}s")


CPU_CASES = [_param(c) for c in CASES if not c.expected.gpu]
GPU_CASES = [_param(c) for c in CASES if c.expected.gpu]


@pytest.mark.parametrize("case", CPU_CASES)
def test_cpu_case_ground_truth(case, tmp_path):
    _ground_truth(case, tmp_path)


@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_case_ground_truth(case, tmp_path):
    import torch

    need = devices_needed(case)
    if torch.cuda.device_count() < need:
        pytest.skip(f"needs {need} CUDA devices, {torch.cuda.device_count()} here")
    _ground_truth(case, tmp_path)


def test_expected_schema_refuses_what_a_case_must_not_say(tmp_path):
    from cases.corpus import load_expected

    good = (CASES[0].dir / "expected.toml").read_text()
    bad = {
        "an unknown key": good.replace("[expected]\n", '[expected]\nroot_cause = "x"\n'),
        "a bare location": re.sub(r'location = ".*"', 'location = "somewhere"', good),
        "an unknown class": re.sub(r'classification = ".*"', 'classification = "probably"', good),
    }
    for what, text in bad.items():
        p = tmp_path / "expected.toml"
        p.write_text(text)
        with pytest.raises(ValueError):
            load_expected(p)
        assert what


def _accuracy():
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("accuracy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _state(klass, location, *, supported_at=None, rerun="supported"):
    hyps = {}
    if supported_at is not None:
        hyps["H-1"] = {"id": "H-1", "statement": f"change at {supported_at}", "status": "supported"}
    return {
        "verdict": {
            "classification": klass,
            "location": location,
            "hypothesis": None,
            "evidence": ["E-1"],
        },
        "hypotheses": hyps,
        "evidence": [
            {"id": "E-1", "kind": "rerun", "result": rerun, "data": {"interventions": ["x"]}}
        ],
    }


def test_accuracy_scores_right_wrong_and_unknown_as_the_benchmark_says():
    score = _accuracy().score
    by_name = {c.name: c.expected for c in CASES}
    frag = by_name["ds-fragment-link"]  # deepspeed/runtime/zero/stage_1_and_2.py:857, tol 6
    site = "/venv/lib/python3.11/site-packages/deepspeed/runtime/zero/stage_1_and_2.py"
    assert score(frag, _state("bug", f"{site}:852"))[0] == "right"
    assert score(frag, _state("bug", f"{site}:840"))[0] == "wrong"  # outside the tolerance
    assert score(frag, _state("bug", "other/stage_1_and_2.py:857"))[0] == "wrong"
    assert score(frag, _state("policy-difference", f"{site}:857"))[0] == "wrong"
    assert score(frag, _state("unknown", None))[0] == "unknown"
    assert score(frag, {"hypotheses": {}, "evidence": []})[0] == "unknown"
    # an unknown verdict with a hypothesis supported somewhere else is wrong, not unknown
    assert score(frag, _state("unknown", None, supported_at="train.py:40"))[0] == "wrong"
    env = by_name["torch-thread-count"]  # env:OMP_NUM_THREADS
    assert score(env, _state("environment", "environment variable OMP_NUM_THREADS"))[0] == "right"
    assert score(env, _state("environment", "MKL_NUM_THREADS"))[0] == "wrong"
    flag = by_name["torch-clip-norm-order"]  # config:--clip-order
    assert score(flag, _state("policy-difference", "launch flag --clip-order"))[0] == "right"
    assert score(flag, _state("policy-difference", "launch flag --clip-order-x"))[0] == "wrong"
