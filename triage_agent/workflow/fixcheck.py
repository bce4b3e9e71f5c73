"""Fix validation: rerun the case under one changed policy, uninstrumented, and compare bits."""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ..bisect import BisectResult, bisect_case
from ..errors import InputError
from ..evidence_data import RerunData, as_model
from ..ledger import Ledger
from ..metrics import MetricDiff, diff_metrics, load_metrics
from ..policies import POLICY_HELP
from ..records import (
    Case,
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    RunSpec,
)
from ..runs import RunOutcome, finished, materialize, materialize_case, rerun_record
from .declared import declared_differences
from .revisions import content_at, resolve


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


def _same_bits(own_baseline: RunOutcome | None, rerun: RunOutcome) -> bool:
    """Whether a rerun under a policy wrote exactly its own baseline's metric bits: every
    step and rank equal, none missing. Unknown (no baseline held) counts as changed."""
    if own_baseline is None or not own_baseline.ok or not own_baseline.metrics:
        return False
    d = diff_metrics(load_metrics(own_baseline.metrics), load_metrics(rerun.metrics))
    return d.first_step is None and bool(d.common_steps) and d.complete


def _outcome(d: MetricDiff, matched: bool) -> EvidenceResult:
    """A match must cover every step and rank; a rerun that stopped short proves nothing."""
    if matched:
        return EvidenceResult.supported
    return EvidenceResult.refuted if d.first_step is not None else EvidenceResult.inconclusive


def rerun_fields(*outs: RunOutcome) -> dict:
    """Evidence fields for the relaunches behind it: every argv whole and the summed seconds
    in ``data.rerun``, the provenance once, as the evidence's own; ``argv`` is the first
    relaunch's command when that relaunch is one command (a command line a person can run),
    never several joined."""
    rec = rerun_record(*outs)
    first = outs[0].argv if outs else []
    return {
        "argv": list(first[0]) if len(first) == 1 else None,
        "provenance": rec.provenance,
        "duration_s": rec.seconds,
        "rerun": rec.model_dump(mode="json", exclude={"provenance"}),
    }


def relaunch_evidence(
    outs: RunOutcome | list[RunOutcome], kind: EvidenceKind = EvidenceKind.rerun, **kw
) -> Evidence:
    """Evidence of relaunches, with :func:`rerun_fields` merged in (its record into the
    data's ``rerun``: rerun, trace-compare and metrics data carry one)."""
    fields = rerun_fields(*(outs if isinstance(outs, list) else [outs]))
    data = as_model(kind, kw.pop("data", {}))
    data.rerun = fields.pop("rerun")  # type: ignore[attr-defined]
    return Evidence(kind=kind, data=data, **fields, **kw)


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
    acted = False
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
        outs = [out_b]
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
            outs.append(out_a)
            failed = failed or (None if out_a.ok else out_a)
        if failed is not None:
            last = relaunch_evidence(
                outs,
                hypotheses=hypotheses,
                result=EvidenceResult.error,
                summary=f"rerun of {failed.run} under policy {policy} failed: {failed.error or failed.exit_codes}; logs: {failed.logs[-2:]}",
                data=RerunData(policy=policy, applied_to=label),
            )
            ledger.add_evidence(last)
            return last
        d = diff_metrics(load_metrics(a_metrics), load_metrics(out_b.metrics))
        matched, said = _against_a(d)
        summary = (
            f"policy '{policy}' ({POLICY_HELP[policy]}) applied to {label}, uninstrumented: {said}"
        )
        last = relaunch_evidence(
            outs,
            hypotheses=hypotheses,
            result=_outcome(d, matched),
            summary=summary,
            data=RerunData(
                policy=policy,
                applied_to=label,
                first_step=d.first_step,
                common_steps=len(d.common_steps),
                gaps=d.gaps(),
            ),
        )
        runs = (case.run_b, case.run_a)[: len(outs)]
        acted = acted or not all(
            _same_bits(finished(spec, ws), o) for spec, o in zip(runs, outs, strict=True)
        )
        if matched or both:
            break
    assert last is not None
    if last.result == EvidenceResult.refuted and not acted:
        # a policy that moved no bit of any run it was applied to did not act on this job:
        # its rerun cannot speak for or against a hypothesis about what moves them
        last = last.model_copy(
            update={
                "result": EvidenceResult.not_applicable,
                "summary": f"not applicable: policy '{policy}' left every metric bit of each "
                f"run it was applied to as its own baseline had it (it does not act on this "
                f"job); {last.summary}",
            }
        )
    ledger.add_evidence(last)
    return last


def _revert_variant(case: Case, ws: Path, files: list[str], tag: str) -> tuple[RunSpec, str]:
    """A copy of B's checkout where each of ``files`` holds its content at A's revision: a
    file A lacks (added in B) is removed, one B lacks (deleted in B) is put back.

    Returns the run to launch there and what was done, said in a phrase. Raises a one-line
    InputError when the case does not allow it.
    """
    import git

    if not case.run_b.cwd:
        raise InputError("run B has no working directory (runs.b.cwd) to copy for a revert")
    revs = resolve(case)
    try:
        work = git.Repo(case.run_b.cwd, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(
            f"run B's working directory {case.run_b.cwd} is not a git checkout: a file revert "
            "copies B's checkout of its revision"
        ) from None
    same_repo = Path(work.common_dir).resolve() == Path(git.Repo(revs.repo).common_dir).resolve()
    if not same_repo or work.head.commit.hexsha != revs.b:
        raise InputError(
            f"run B's working directory {case.run_b.cwd} is not a checkout of run B's revision "
            f"{revs.b_rev} of {revs.repo}: a file revert needs one"
        )
    root = Path(work.working_tree_dir).resolve()
    wsr = ws.resolve()
    variant = ws / "variants" / tag

    def skip(d: str, names: list[str]) -> set[str]:
        # never copy git's own files, nor the workspace (the variant lives in it)
        return {n for n in names if n == ".git" or (Path(d) / n).resolve() == wsr}

    if variant.exists():
        shutil.rmtree(variant)
    shutil.copytree(root, variant, ignore=skip, symlinks=True)
    done = []
    for file in files:
        old = content_at(case, revs.a, file)
        new = content_at(case, revs.b, file)
        if old == new:
            raise InputError(
                f"{file} is the same at {revs.a_rev} and {revs.b_rev}: nothing to revert"
            )
        target = variant / file
        if old is None:
            target.unlink(missing_ok=True)
            done.append(f"{file} removed (added after {revs.a_rev})")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(old)
            done.append(
                f"{file} restored (deleted after {revs.a_rev})"
                if new is None
                else f"{file} taken back to {revs.a_rev}"
            )
    cwd = variant / Path(case.run_b.cwd).resolve().relative_to(root)
    return case.run_b.model_copy(update={"cwd": str(cwd)}), ", ".join(done)


def _revert_tag(files: list[str]) -> str:
    """The label of a revert's run and variant: the files' names in the run-id alphabet, cut
    to fit its 100 characters, and a hash of the exact list so that two lists never share one."""
    said = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(files))[:60]
    return f"revert-{said}-{hashlib.sha256(chr(0).join(files).encode()).hexdigest()[:8]}"


def validate_revert(
    case: Case,
    ledger: Ledger,
    file: str | list[str],
    hypotheses: list[str],
    baseline_a_metrics: str,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Evidence:
    """For runs that differ in source: rerun B with files taken back to A's revision.

    The intervention is those files, nothing else: a copy of B's checkout where each holds
    its content at A's revision (removed when A has no such file, restored when B deleted
    it). When every step then matches A, that change is the cause. A case that does not
    allow it (B's working directory is not a checkout of B's revision) is a one-line
    InputError, never a silent skip.
    """
    files = [file] if isinstance(file, str) else list(file)
    ws = Path(ledger.workspace)
    tag = _revert_tag(files)
    run, did = _revert_variant(case, ws, files, tag)
    on_status(f"fix check: B with {did}")
    out = materialize(run, ws, tag, timeout_s=timeout_s, progress=on_status)
    data = RerunData(
        reverted=files[0],
        files=files,
        to_rev=case.run_a.source.rev if case.run_a.source else None,
        applied_to="B only",
        variant=str(Path(run.cwd or "")),
    )
    if not out.ok:
        ev = relaunch_evidence(
            out,
            hypotheses=hypotheses,
            result=EvidenceResult.error,
            summary=f"rerun of B with {did} failed: {out.error or out.exit_codes}",
            data=data,
        )
        ledger.add_evidence(ev)
        return ev
    d = diff_metrics(load_metrics(baseline_a_metrics), load_metrics(out.metrics))
    matched, said = _against_a(d)
    ev = relaunch_evidence(
        out,
        hypotheses=hypotheses,
        result=_outcome(d, matched),
        summary=f"B rerun with only {did}, uninstrumented: {said}",
        data=data.model_copy(
            update={"first_step": d.first_step, "common_steps": len(d.common_steps)}
        ),
    )
    ledger.add_evidence(ev)
    return ev


def source_change_class(case: Case, ledger: Ledger, besides: str | None = None) -> Classification:
    """How a proven source change is classified: by the kind of comparison the case declares.

    When the runs are the same job at two revisions of the code (no declared difference in
    environment, launch flags or config keys: only ``runs.<x>.source`` differs), the
    comparison asks whether the update keeps the bits; a change whose revert restores every
    step is then a regression against that premise, a bug, unless the reader declares it the
    new numerical policy (the verdict says so and shows the diff). When the runs also differ
    in a declared setting, that setting may be what asks for other arithmetic: unknown.
    ``besides`` names a declared key that is itself the source (a path to the package's
    tree): it does not count as a setting.
    """
    a, b = materialize_case(case, Path(ledger.workspace))  # cached: the baselines
    same_job = not [
        d for d in declared_differences(case, a.provenance, b.provenance) if d.key != besides
    ]
    return Classification.bug if same_job else Classification.unknown


class SourceChange(BaseModel):
    """A minimal set of hunks proven by bisection, as the verdict names it."""

    hypothesis: Hypothesis
    location: str = Field(description="each hunk's file:line in B, earliest effect first")
    diffs: list[str] = Field(default_factory=list, description="each proven hunk's diff")


def _hunks_said(res: BisectResult, place: Callable[[str], str]) -> tuple[str, str]:
    """(where: each hunk's location and its own effect, its diffs), earliest effect first."""
    where = []
    for h in res.hunks:
        kept = f"alone in B: {h.kept.said}" if h.kept is not None else ""
        alone = f"reverted alone: {h.alone.said}" if h.alone is not None else ""
        what = "; ".join(t for t in (kept, alone) if t)
        at = place(h.hunk.location)
        where.append(f"{at} ({what})" if what else at)
    diffs = "\n".join(
        f"{place(h.hunk.location)} ({h.hunk.commit[:10]}):\n{h.hunk.diff}" for h in res.hunks
    )
    return "; ".join(where), diffs


def bisect_source_change(
    case: Case,
    ledger: Ledger,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
    repo: Path | None = None,
    rev_range: str | None = None,
    extra_roots: list[Path] | None = None,
    place: Callable[[str], str] = lambda loc: loc,
    same_job_without: str | None = None,
    context: int = 3,
    record: bool = True,
) -> SourceChange | None:
    """No supported hypothesis, and the runs differ in source: bisect the revisions.

    :func:`triage_agent.bisect.bisect_case` finds the first bad commit, then a minimal set
    of commits and hunks whose revert makes B match A on every step, proves it by one
    rerun and records each hunk reverted alone and kept alone. The proven hypothesis gets
    the diffs in its rationale and the classification :func:`source_change_class` gives;
    the location names the hunk whose own effect shows at the earliest step first. A case
    that cannot be bisected, or a bisection without a proven set, is a ledger note and None.
    ``repo``, ``rev_range`` and ``extra_roots`` bisect a repository the workflow made (two
    trees as two commits); ``place`` names a hunk's location as the run names that tree;
    ``record`` False: ``case`` is derived from the ledger's (B run inside that repository).
    """
    try:
        res = bisect_case(
            case,
            ledger,
            repo=repo,
            rev_range=rev_range,
            extra_roots=extra_roots,
            context=context,
            budget_s=max(deadline - time.monotonic(), 0.0),
            timeout_s=timeout_s,
            progress=lambda p: on_status(f"bisect {p.phase}: {p.message}"),
            record=record,
        )
    except InputError as exc:
        ledger.note(f"the source revisions cannot be bisected: {exc}", level="warning")
        return None
    if res.status != "found" or res.hypothesis is None:
        if res.status != "stopped":  # a stop has noted itself
            ledger.note(f"bisection of the source revisions: {res.message}", level="warning")
        return None
    where, diffs = _hunks_said(res, place)
    where = where or ", ".join(c.said() for c in res.culprits)
    hyp = ledger.state().hypotheses[res.hypothesis]
    changes = {
        "classification": source_change_class(case, ledger, same_job_without),
        # opening with the locations: a resumed workflow's verdict reads its first word back
        "rationale": f"{where}. {res.message}" + (f"\n{diffs}" if diffs else ""),
    }
    if any(getattr(hyp, k) != v for k, v in changes.items()):
        hyp = ledger.update_hypothesis(hyp.id, **changes)
    return SourceChange(hypothesis=hyp, location=where, diffs=[h.hunk.diff for h in res.hunks])
