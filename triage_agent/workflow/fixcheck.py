"""Fix validation: rerun the case under one changed policy, uninstrumented, and compare bits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..ledger import Ledger
from ..metrics import MetricDiff, diff_metrics, load_metrics
from ..policies import POLICY_HELP
from ..records import (
    Case,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
)
from ..runs import joined_argv, materialize


def _against_a(d: MetricDiff) -> tuple[bool, str]:
    """Whether a rerun matches A on every step and rank, and that said in one phrase."""
    if d.first_step is None and d.common_steps and d.complete:
        steps = d.common_steps
        return (
            True,
            f"all {len(steps)} common steps ({steps[0]}..{steps[-1]}) now match bit for bit",
        )
    if d.first_step is not None:
        return False, f"still differs first at step {d.first_step}"
    return False, f"equal where both have data but incomplete ({d.gaps()}): not a match"


def _outcome(d: MetricDiff, matched: bool) -> EvidenceResult:
    """A match must cover every step and rank; a rerun that stopped short proves nothing."""
    if matched:
        return EvidenceResult.supported
    return EvidenceResult.refuted if d.first_step is not None else EvidenceResult.inconclusive


def validate_fix(
    case: Case,
    ledger: Ledger,
    policy: str,
    hypotheses: list[str],
    baseline_a_metrics: str,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Evidence:
    """Rerun B under ``policy`` against A's baseline; if that is not enough, rerun both.

    Supported when every common step's metric bits match. No tracing is injected: what is
    validated is the uninstrumented job with only the policy changed.
    """
    ws = Path(ledger.workspace)
    attempts = [("B only", False), ("A and B", True)]
    last: Evidence | None = None
    for label, both in attempts:
        on_status(f"fix check: policy {policy} on {label}")
        out_b = materialize(
            case.run_b,
            ws,
            f"policy-{policy}",
            policies=[policy],
            timeout_s=timeout_s,
            progress=on_status,
        )
        argv = joined_argv(out_b)
        a_metrics = baseline_a_metrics
        failed = None if out_b.ok else out_b
        if both:
            out_a = materialize(
                case.run_a,
                ws,
                f"policy-{policy}",
                policies=[policy],
                timeout_s=timeout_s,
                progress=on_status,
            )
            a_metrics = out_a.metrics
            argv = joined_argv(out_b, out_a)
            failed = failed or (None if out_a.ok else out_a)
        if failed is not None:
            last = Evidence(
                hypotheses=hypotheses,
                kind=EvidenceKind.rerun,
                result=EvidenceResult.error,
                summary=f"rerun of {failed.run} under policy {policy} failed: {failed.error or failed.exit_codes}; logs: {failed.logs[-2:]}",
                argv=argv,
            )
            ledger.add_evidence(last)
            return last
        d = diff_metrics(load_metrics(a_metrics), load_metrics(out_b.metrics))
        matched, said = _against_a(d)
        summary = (
            f"policy '{policy}' ({POLICY_HELP[policy]}) applied to {label}, uninstrumented: {said}"
        )
        last = Evidence(
            hypotheses=hypotheses,
            kind=EvidenceKind.rerun,
            result=_outcome(d, matched),
            summary=summary,
            argv=argv,
            data={
                "policy": policy,
                "applied_to": label,
                "first_step": d.first_step,
                "common_steps": len(d.common_steps),
                "gaps": d.gaps(),
            },
            duration_s=out_b.seconds,
        )
        if matched or both:
            break
    assert last is not None
    ledger.add_evidence(last)
    return last


def validate_revert(
    case: Case,
    ledger: Ledger,
    file: str,
    hypotheses: list[str],
    baseline_a_metrics: str,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Evidence | None:
    """For runs that differ in source: rerun B with one file taken back to A's revision.

    The intervention is one file, nothing else: a copy of B's working directory where
    ``file`` (relative to the repository root) holds its content at A's revision. When every
    step then matches A, that file's change is the cause. Returns None when the case does not
    allow it (B's working directory is not a checkout of B's revision of that repository).
    """
    import shutil

    import git

    from ..paths import check_rev

    a, b = case.run_a.source, case.run_b.source
    if a is None or b is None or not case.run_b.cwd or not a.rev:
        return None
    try:
        repo = git.Repo(b.repo, search_parent_directories=True)
        work = git.Repo(case.run_b.cwd)
        rev_b = repo.commit(check_rev(b.rev or "HEAD")).hexsha
        if (
            work.head.commit.hexsha != rev_b
            or Path(work.common_dir).resolve() != Path(repo.common_dir).resolve()
        ):
            return None
        old = repo.git.show(f"{repo.commit(check_rev(a.rev)).hexsha}:{file}")
    except (git.GitError, ValueError):
        return None
    ws = Path(ledger.workspace)
    variant = ws / "variants" / f"revert-{file.replace('/', '_')}"
    if variant.exists():
        shutil.rmtree(variant)
    shutil.copytree(case.run_b.cwd, variant, ignore=shutil.ignore_patterns(".git", ".triage"))
    (variant / file).write_text(old + ("\n" if not old.endswith("\n") else ""))
    run = case.run_b.model_copy(update={"cwd": str(variant), "name": case.run_b.name})
    on_status(f"fix check: B with {file} at {a.rev}")
    out = materialize(
        run, ws, f"revert-{file.replace('/', '_')}", timeout_s=timeout_s, progress=on_status
    )
    argv = joined_argv(out)
    if not out.ok:
        ev = Evidence(
            hypotheses=hypotheses,
            kind=EvidenceKind.rerun,
            result=EvidenceResult.error,
            summary=f"rerun of B with {file} reverted failed (exit codes {out.exit_codes})",
            argv=argv,
        )
        ledger.add_evidence(ev)
        return ev
    d = diff_metrics(load_metrics(baseline_a_metrics), load_metrics(out.metrics))
    matched, said = _against_a(d)
    ev = Evidence(
        hypotheses=hypotheses,
        kind=EvidenceKind.rerun,
        result=_outcome(d, matched),
        summary=f"B rerun with only {file} taken back to {a.rev}, uninstrumented: {said}",
        argv=argv,
        data={
            "reverted": file,
            "to_rev": a.rev,
            "first_step": d.first_step,
            "variant": str(variant),
        },
        duration_s=out.seconds,
    )
    ledger.add_evidence(ev)
    return ev


MAX_REVERTS = 8


def changed_files(case: Case) -> list[str]:
    """Python files that differ between A's and B's revisions, repository-relative."""
    import git

    from ..paths import check_rev

    a, b = case.run_a.source, case.run_b.source
    if a is None or b is None or not a.rev:
        return []
    try:
        repo = git.Repo(b.repo, search_parent_directories=True)
        ra = repo.commit(check_rev(a.rev)).hexsha
        rb = repo.commit(check_rev(b.rev or "HEAD")).hexsha
        names = repo.git.diff("--name-only", ra, rb).splitlines()
    except (git.GitError, ValueError):
        return []
    return [n for n in names if n.endswith(".py")]


def bisect_changed_files(
    case: Case,
    ledger: Ledger,
    baseline_a_metrics: str,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Hypothesis | None:
    """No supported hypothesis, and the runs differ in source: revert each changed file alone.

    Each file is its own hypothesis, tested by one intervention (B with that file at A's
    revision); the first whose revert makes every step match is supported. Bounded: with
    more than MAX_REVERTS changed files it stops and says how to narrow the case.
    """
    import hashlib
    import time

    files = changed_files(case)
    if not files:
        return None
    if len(files) > MAX_REVERTS:
        ledger.note(
            f"{len(files)} Python files changed between the revisions: more than {MAX_REVERTS} "
            "to revert one at a time; narrow the case (scan_paths, or a closer revision)",
            level="warning",
        )
        return None
    a, b = case.run_a.source, case.run_b.source
    assert a is not None and b is not None
    for file in files:
        if time.monotonic() > deadline:
            ledger.note("budget reached while reverting changed files", level="warning")
            return None
        hid = "H-" + hashlib.sha256(f"revert|{file}|{a.rev}|{b.rev}".encode()).hexdigest()[:10]
        st = ledger.state()
        hyp = st.hypotheses.get(hid) or ledger.put_hypothesis(
            Hypothesis(
                id=hid,
                statement=f"the change to {file} between {a.rev} and {b.rev} changes the bits",
                category="source-change",
                rationale=f"{file} is one of {len(files)} changed Python file(s); no probe "
                "finding explained the divergence, so each changed file is reverted alone",
            )
        )
        if hyp.status == HypothesisStatus.refuted:
            continue
        on_status(f"B with only {file} taken back to {a.rev}")
        ev = next(
            (
                e
                for e in st.evidence_for(hid)
                if e.kind == EvidenceKind.rerun and e.result != EvidenceResult.error
            ),
            None,
        ) or validate_revert(
            case, ledger, file, [hid], baseline_a_metrics, timeout_s=timeout_s, on_status=on_status
        )
        if ev is None:
            return None  # B's working directory is not a checkout: no revert is possible
        if ev.result == EvidenceResult.supported:
            return ledger.update_hypothesis(hid, status=HypothesisStatus.supported)
        if ev.result == EvidenceResult.refuted:
            ledger.update_hypothesis(hid, status=HypothesisStatus.refuted)
    return None
