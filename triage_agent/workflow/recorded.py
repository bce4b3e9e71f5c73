"""Traces for stage 2 taken from flight recordings instead of a traced relaunch.

A run whose case names a recording (``trace_dir`` = a directory written by ``triage record``
or by a launcher that set the recorder up, see :mod:`triage_agent.fingerprint.recorder`)
already holds module-level digests of every step it kept. When both runs' recordings hold
the whole window at the capture settings stage 2 asks for, the window is cut out of them
(:func:`~triage_agent.fingerprint.recorder.window`) and compared with no relaunch.

A recording is used only when it did not perturb its run: the recorded run's metric bits
must equal its untraced baseline's, the same check a traced relaunch passes. Where that
cannot be shown (the recording does not know its metric files, the bits differ, the run
stopped short) the ledger says why, and stage 2 relaunches with the tracer as before.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ..compare.sentinel import SentinelDivergence, device_suspects, locate
from ..errors import InputError
from ..evidence_data import TraceCompareData
from ..fingerprint import CaptureConfig
from ..fingerprint.recorder import metric_source, read_settings, summarize, window
from ..ledger import Ledger
from ..records import Case, Evidence, EvidenceKind, EvidenceResult, RunSpec
from ..runs import RunOutcome
from .perturbation import is_repeat, perturbation

LABEL = "recorded"


def _unfit(cfg: CaptureConfig, recorded: CaptureConfig) -> str | None:
    """Why traces cut from a recording made with ``recorded`` are not what ``cfg`` asks for."""
    for key in ("level", "digest", "scope", "dump", "step_function", "order_names"):
        want, have = getattr(cfg, key), getattr(recorded, key)
        if want != have:
            return f"the window needs {key} {want!r}, the recording has {have!r}"
    if (
        cfg.ranks is not None
        and recorded.ranks is not None
        and set(cfg.ranks) - set(recorded.ranks)
    ):
        return f"the window needs ranks {cfg.ranks}, the recording holds {recorded.ranks}"
    return None


def _cut(run: RunSpec, cfg: CaptureConfig, ws: Path) -> tuple[RunOutcome | None, str]:
    """The window of ``run``'s recording as a traced run's outcome, or (None, why not)."""
    root = Path(run.trace_dir or "")
    settings = read_settings(root)
    if settings is None:
        return None, f"run {run.name}'s trace_dir {root} is no recording"
    why = _unfit(cfg, settings.capture_config())
    if why is not None:
        return None, why
    assert cfg.steps is not None
    a, b = cfg.steps
    held = summarize(root)
    short = [r.rank for r in held if not set(range(a, b + 1)) <= set(r.steps)]
    if not held or short:
        return None, f"run {run.name}'s recording does not hold steps {a}-{b} on rank(s) {short}"
    metrics, why = metric_source(root)
    if metrics is None:
        return None, f"run {run.name}: {why}"
    out = (ws / "runs" / run.name / f"{LABEL}-{a}-{b}").resolve()
    if out.exists():
        shutil.rmtree(out)  # cut again: the ring may have moved on since
    try:
        window(root, (a, b), out)
    except InputError as exc:
        return None, str(exc)
    outcome = RunOutcome(
        run=run.name,
        label=LABEL,
        out_dir=str(root),
        metrics=str(metrics),
        trace_dir=str(out),
        argv=[],
        exit_codes=[0],
        warnings=[f"steps {a}-{b} cut from the recording {root}, not relaunched"],
    )
    return outcome, ""


def recorded_pair(
    case: Case,
    ledger: Ledger,
    ws: Path,
    base: dict[str, str],
    cfg: CaptureConfig,
    label: str,
    *,
    on_status: Callable[[str], None],
) -> tuple[RunOutcome, RunOutcome] | None:
    """Both runs' traces of ``cfg``'s window from their recordings, or None to relaunch.

    ``base``: each run's untraced baseline metrics, which a recording must not have moved.
    None without a word where neither run names a recording; otherwise the ledger says why a
    recording is not used, or that the window came from the recordings with no relaunch.
    """
    runs = (case.run_a, case.run_b)
    if not any(read_settings(Path(r.trace_dir)) for r in runs if r.trace_dir):
        return None
    if cfg.steps is None:
        return None
    cut = [_cut(r, cfg, ws) for r in runs]
    why = next((w for o, w in cut if o is None), None)
    problems = [why] if why else perturbation(base, (cut[0][0], cut[1][0]), is_repeat(case))
    a, b = cfg.steps
    if problems:
        ledger.note(
            f"{label} at {cfg.level} level, steps {a}-{b}: the recordings are not used "
            f"({'; '.join(problems)}); relaunching with the tracer",
            level="warning",
        )
        return None
    ra, rb = cut[0][0], cut[1][0]
    assert ra is not None and rb is not None
    ledger.note(
        f"{label} at {cfg.level} level, steps {a}-{b}: taken from the recordings "
        f"{ra.out_dir} and {rb.out_dir} with no relaunch; "
        + (
            "A and B are one command, so the recordings' bits are not checked against a "
            "baseline (the traced pair must still diverge)"
            if is_repeat(case)
            else "each recorded run's metric bits equal its untraced baseline's"
        )
    )
    on_status(f"{label}: steps {a}-{b} from the recordings, no relaunch")
    return ra, rb


def _sentinel_roots(case: Case) -> tuple[Path, Path] | None:
    """Both runs' sentinel recordings, or None where either run names none."""
    roots = []
    for run in (case.run_a, case.run_b):
        settings = read_settings(Path(run.trace_dir)) if run.trace_dir else None
        if settings is None or settings.level not in ("sentinel", "collective"):
            return None
        roots.append(Path(run.trace_dir or ""))
    return roots[0], roots[1]


def sentinel_reading(case: Case, ledger: Ledger) -> SentinelDivergence | None:
    """Where the runs' sentinel recordings first part, and any rank that disagrees with its
    peers inside one run, recorded in the ledger with no relaunch; None without recordings.

    The step is the first whose collectives or optimizer writes differ, which can come before
    the first differing metric (an update at step K shows in the loss of step K+1). A device
    suspect is a caveat every verdict carries: a rank whose all-reduced buffer differs from
    its group's explains bits no change of the job's code or settings can.
    """
    roots = _sentinel_roots(case)
    if roots is None:
        return None
    dirs = {"a": str(roots[0]), "b": str(roots[1])}
    for e in ledger.state().evidence:
        held = e.data if isinstance(e.data, TraceCompareData) else None
        if held is not None and held.level == "sentinel" and held.trace_dirs == dirs:
            return None  # read before this run was resumed
    try:
        found = locate(*roots)
    except InputError as exc:
        ledger.note(f"the sentinel recordings cannot be read: {exc}", level="warning")
        return None
    rows = [
        {
            "label": "sentinel",
            "rank": f.rank,
            "role": "made here" if f.starts else "received through a collective",
            "step": found.step,
            "name": f.record,
            "detail": f.caller or "",
        }
        for f in found.firsts
    ]
    ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.trace_compare,
            result=EvidenceResult.observed,
            summary=f"sentinel recordings: {found.summary()}",
            data=TraceCompareData(
                status="identical" if found.step is None else "diverged",
                level="sentinel",
                steps=None if found.step is None else [found.step],
                complete=not found.notes,
                warnings=found.notes,
                trace_dirs=dirs,
                rows=rows,
            ),
        )
    )
    for run, root in zip(("a", "b"), roots, strict=True):
        check = device_suspects(root)
        for d in check.suspects:
            ledger.caveat(
                f"device suspect in run {run}: rank {d.rank} at step {d.step}, {d.record}: "
                f"{d.reason} (ranks {d.peers} agree); silent data corruption is possible"
            )
    return found
