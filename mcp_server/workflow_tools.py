"""Causal checks and the whole workflow: run policies, fix validation, a one-file revert,
and the headless two-stage workflow of ``triage run``.

Each tool calls one library function of ``triage_agent.workflow``. What is launched is
always the startup case file's own runs (``Workspace.require_launch``); the caller names a
policy from ``triage_agent.policies.POLICIES``, a file changed between the runs' source
revisions, or the workflow's bounds - never a command. Reruns are uninstrumented: nothing
is traced, so what is validated is the real job with one thing changed.

Limits: fix validation and the workflow run for as long as the case's runs take (each
launch bounded by ``timeout_s`` and the case's own timeout); the workflow's
``budget_minutes`` is checked between stages, not inside a running launch.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import BaseModel, Field, create_model

from triage_agent.errors import InputError
from triage_agent.ledger_view import (
    DiscriminatorRow,
    VerdictBasis,
    discriminator_rows,
    verdict_basis,
)
from triage_agent.policies import POLICIES, POLICY_HELP, check
from triage_agent.records import Case, Evidence, EvidenceResult, Verdict
from triage_agent.workflow.characterize import MismatchReport
from triage_agent.workflow.engine import NextMoves
from triage_agent.workflow.options import RunOptions
from triage_agent.workflow.timing import StageTime

from .security import MAX_LIST_ITEMS, MAX_PATH_CHARS, Workspace, cap_text
from .spec import ID_PATTERN, In, Progress


def _status(progress: Progress, prefix: str = "") -> tuple[list[int], object]:
    """Turn the library's status lines into progress notifications whose value only grows."""
    count = [0]

    def status(stage: str, message: str) -> None:
        count[0] += 1
        progress(count[0], None, cap_text(f"{prefix}{stage}: {message}", 500))

    return count, status


def _baseline_a(ws: Workspace, case: Case, timeout_s: float, status) -> str:
    """Run A's uninstrumented baseline metrics (both baselines are made, cached afterwards)."""
    from triage_agent.workflow.engine import baselines

    ws.output_dir("runs")
    ma, _mb = baselines(case, ws.ledger, status)
    if ma is None:
        raise InputError(
            "the case's runs are not relaunchable: each needs launch commands and metrics "
            "under '{out}'"
        )
    return str(ws.path(ma, must_exist=True))


# -- policies --------------------------------------------------------------------------------
class ListPoliciesIn(In):
    pass


class PolicyInfo(BaseModel):
    name: str
    changes: str = Field(description="what the policy changes inside the run's processes")


class PoliciesOut(BaseModel):
    policies: list[PolicyInfo]


def list_policies(ws: Workspace, args: ListPoliciesIn, progress: Progress) -> PoliciesOut:
    """The run policies a fix check can apply, one at a time, and what each changes. A policy
    is injected into an unmodified launch command; it is the unit of a controlled
    intervention."""
    return PoliciesOut(
        policies=[PolicyInfo(name=n, changes=POLICY_HELP.get(n, "")) for n in sorted(POLICIES)]
    )


# -- fix validation --------------------------------------------------------------------------
class FixCheckOut(BaseModel):
    evidence: Evidence = Field(description="the rerun evidence recorded in the ledger")
    matched: bool = Field(description="every common step's metric bits now match run A's")
    baseline_a: str = Field(description="run A's uninstrumented baseline metrics compared with")


class ValidateFixIn(In):
    policy: str = Field(
        min_length=1,
        max_length=64,
        pattern=ID_PATTERN,
        description=f"ONE run policy to apply (see list_policies): {', '.join(sorted(POLICIES))}",
    )
    hypotheses: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="hypothesis ids the rerun tests (its evidence is recorded against them)",
    )
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="per launch command")


def validate_fix(ws: Workspace, args: ValidateFixIn, progress: Progress) -> FixCheckOut:
    """Causal check of a fix: rerun the case's run B under ONE named policy, uninstrumented,
    and compare its metric bits with run A's baseline; if B alone does not match, rerun A and
    B both under the policy. Supported when every common step matches bit for bit. Uses only
    the startup case file's launch commands; baselines are made first (cached)."""
    from triage_agent.workflow.fixcheck import validate_fix as check_fix

    case = ws.require_launch()
    check([args.policy])
    ws.require_hypotheses(args.hypotheses)
    timeout = min(args.timeout_s, case.timeout_s)
    count, status = _status(progress)
    base_a = _baseline_a(ws, case, timeout, status)
    ev = check_fix(
        case,
        ws.ledger,
        args.policy,
        args.hypotheses,
        base_a,
        timeout_s=timeout,
        on_status=lambda m: status("fix", m),
    )
    progress(count[0] + 1, count[0] + 1, ev.summary)
    return FixCheckOut(
        evidence=ev, matched=ev.result == EvidenceResult.supported, baseline_a=base_a
    )


class RevertFileIn(In):
    file: str = Field(
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="a file changed between run A's and run B's source revisions, relative "
        "to the repository root",
    )
    hypotheses: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="per launch command")


def _changed(ws: Workspace, case: Case) -> set[str]:
    """Paths changed between the runs' revisions (the library's rule), after checking that
    the repository is contained and both revisions are plain and resolve."""
    from triage_agent.workflow.revisions import changed_files

    a, b = case.run_a.source, case.run_b.source
    if a is None or b is None or a.rev is None:
        raise InputError(
            "reverting a file needs both runs' sources, run A with a revision (runs.<x>.source)"
        )
    ws.rev(b.repo, a.rev)
    ws.rev(b.repo, b.rev or "HEAD")
    return {p for c in changed_files(case) for p in (c.path, c.old_path) if p}


def _check_relative(file: str) -> str:
    p = PurePosixPath(file)
    if "\x00" in file or "\\" in file or p.is_absolute() or ".." in p.parts or not p.parts:
        raise InputError(
            f"file {file[:80]!r} must be a relative path inside the repository, without '..'"
        )
    return p.as_posix()


def revert_file(ws: Workspace, args: RevertFileIn, progress: Progress) -> FixCheckOut:
    """Causal check for a source update: rerun run B uninstrumented in a copy of its working
    directory where ONE file holds its content at run A's revision, and compare metric bits
    with run A's baseline. The file must be one changed between the runs' revisions. The copy
    lives under the ledger directory and is rebuilt on each call."""
    from triage_agent.workflow.fixcheck import validate_revert

    case = ws.require_launch()
    ws.require_hypotheses(args.hypotheses)
    file = _check_relative(args.file)
    changed = _changed(ws, case)
    if file not in changed:
        shown = ", ".join(sorted(changed)[:10]) or "none"
        raise InputError(
            f"{file} did not change between run A's and run B's revisions (changed: {shown})"
        )
    if case.run_b.cwd is None:
        raise InputError("run B has no working directory (runs.b.cwd) to copy")
    timeout = min(args.timeout_s, case.timeout_s)
    count, status = _status(progress)
    base_a = _baseline_a(ws, case, timeout, status)
    ws.output_dir("variants")
    ev = validate_revert(
        case,
        ws.ledger,
        file,
        args.hypotheses,
        base_a,
        timeout_s=timeout,
        on_status=lambda m: status("revert", m),
    )
    progress(count[0] + 1, count[0] + 1, ev.summary)
    return FixCheckOut(
        evidence=ev, matched=ev.result == EvidenceResult.supported, baseline_a=base_a
    )


# -- the whole workflow ----------------------------------------------------------------------
def _tool_bounds(model: type[BaseModel], **bounds: dict) -> dict:
    """The library's fields for a tool input, with the tighter bounds a tool call gets
    (defaults and descriptions stay the library's own)."""
    return {
        name: (Annotated[info.annotation, Field(**bounds.get(name, {}))], info)
        for name, info in model.model_fields.items()
    }


RunWorkflowIn = create_model(
    "RunWorkflowIn",
    __base__=In,
    __doc__="Bounds of one headless workflow run (the library's RunOptions).",
    **_tool_bounds(
        RunOptions,
        budget_minutes={"ge": 1, "le": 240},
        timeout_s={"le": 3600},
    ),
)


class RunWorkflowOut(BaseModel):
    verdict: Verdict | None = Field(description="None when no mismatch was found")
    basis: VerdictBasis | None = Field(
        default=None,
        description="what the verdict rests on: an intervention that made every step match, "
        "or a reproducer alone",
    )
    interventions: list[DiscriminatorRow] = Field(
        default_factory=list,
        description="the discriminator table: each rerun's one change, the run it was applied "
        "to, and the first differing step or 'all N steps match'",
    )
    mismatch: MismatchReport | None
    seconds: float
    stages: list[StageTime] = Field(
        default_factory=list, description="wall seconds and run launches per stage"
    )
    notes: list[str]
    ledger: str


def run_workflow(ws: Workspace, args: RunWorkflowIn, progress: Progress) -> RunWorkflowOut:
    """Run the whole headless two-stage workflow of `triage run` on the open case: baselines,
    confirm the mismatch, bounded static triage with reproducers, tracing when the case is
    relaunchable, one-policy fix validation uninstrumented, and the verdict, all recorded in
    the ledger. Resumable: finished stages are not redone. Progress is reported per stage.
    A case with launch commands must be the startup case file's."""
    from triage_agent.workflow.engine import run_workflow as run

    case = ws.require_case()
    if any(r.launch for r in (case.run_a, case.run_b)):
        ws.require_launch()
        ws.output_dir("runs")
    opts = RunOptions.model_validate(
        {**args.model_dump(), "timeout_s": min(args.timeout_s, case.timeout_s)}
    )
    count, status = _status(progress)
    res = run(case, ws.ledger, opts, status)
    rep = res.mismatch
    if rep is not None:
        d = rep.diff
        rep = rep.model_copy(
            update={
                "diff": d.model_copy(
                    update={
                        "common_steps": d.common_steps[:MAX_LIST_ITEMS],
                        "mismatches": d.mismatches[:MAX_LIST_ITEMS],
                        "only_in_a": d.only_in_a[:MAX_LIST_ITEMS],
                        "only_in_b": d.only_in_b[:MAX_LIST_ITEMS],
                    }
                )
            }
        )
    done = res.verdict.statement if res.verdict else (res.notes[0] if res.notes else "done")
    progress(count[0] + 1, count[0] + 1, cap_text(done, 500))
    st = ws.ledger.state()
    return RunWorkflowOut(
        verdict=res.verdict,
        basis=verdict_basis(st),
        interventions=discriminator_rows(st)[:MAX_LIST_ITEMS],
        mismatch=rep,
        seconds=res.seconds,
        stages=res.stages,
        notes=[cap_text(n, 2000) for n in res.notes[:MAX_LIST_ITEMS]],
        ledger=str(Path(ws.ledger.path)),
    )


# -- the chooser's proposals -----------------------------------------------------------------
class SuggestNextIn(In):
    """What the headless loop would do next on the open case (nothing is launched)."""

    mismatch_step: int | None = Field(
        default=None, ge=0, le=10**9, description="the step you believe first differs"
    )


def suggest_next(ws: Workspace, args: SuggestNextIn, progress: Progress) -> NextMoves:
    """The loop's chooser, ranked: every move the proposers offer now (observe, test an
    intervention on A, B or both, read a proven setting), each with its cost, its gain, why,
    and the ledger evidence behind it; then the moves held back and why (a test nothing
    observed asks for waits for the observations; nothing is tested once a cause is proven).
    Take one with rerun_with_intervention (its `intervention` and `run`), or leave it.
    Launches nothing; the baselines must have run (confirm_mismatch or run_workflow)."""
    from triage_agent.workflow.engine import suggest_next as suggest

    case = ws.require_case()
    out = suggest(case, ws.ledger, RunOptions(mismatch_step=args.mismatch_step))
    progress(1, 1, cap_text(out.said, 500))
    return out.model_copy(update={"suggestions": out.suggestions[:MAX_LIST_ITEMS]})
