"""``rerun_with_intervention``: one run of the case rerun with one thing changed, compared.

A thin adapter over :func:`triage_agent.interventions.intervene`, the function behind
``triage rerun``. The caller names the run and interventions in their text form; what is
launched is always the startup case file's own commands (``Workspace.require_launch``),
changed only as the vocabulary allows. Changes that would let a caller choose code to run
(``LD_PRELOAD``, ``PYTHONPATH``, a standard-library replacement) are refused
(:func:`triage_agent.interventions.check_untrusted`); a file revert goes through the
``revert_file`` tool, which prepares the checkout.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from triage_agent.errors import InputError
from triage_agent.interventions import (
    FORMS,
    PatchIntervention,
    RevertIntervention,
    StepMatch,
    check_untrusted,
    intervene,
    parse_intervention,
)
from triage_agent.records import EvidenceResult

from .security import MAX_LIST_ITEMS, Workspace, cap_text
from .spec import In, Progress

InterventionText = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class RerunWithInterventionIn(In):
    run: Literal["a", "b", "both"] = Field(
        description="the run the interventions are applied to; both: the same change in each run, "
        "the two reruns compared with each other (a repeat pins an input neither controlled)"
    )
    interventions: list[InterventionText] = Field(
        min_length=1, max_length=20, description=f"one change each, in text form: {FORMS}"
    )
    hypotheses: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="hypothesis ids the result bears on: supported when every step matches",
    )
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="per launch command")


class RerunWithInterventionOut(BaseModel):
    run: str
    compared_with: str
    changed: list[str] = Field(description="the one thing each intervention changed, said")
    line: str = Field(description="'all 41 steps match' or 'first differing step 3'")
    match: StepMatch
    result: EvidenceResult
    evidence_id: str
    argv: list[list[str]] = Field(description="every command the rerun ran")
    seconds: float = Field(description="summed over every command of the rerun")
    cached: bool
    warnings: list[str]


def rerun_with_intervention(
    ws: Workspace, args: RerunWithInterventionIn, progress: Progress
) -> RerunWithInterventionOut:
    """Rerun run A or B of the case uninstrumented with interventions applied - set or unset
    an environment variable, change a key of the run's JSON config or a launch flag,
    suppress or replace one function (patched in every process, no source edit), or a
    policy (restore-rng, deterministic) - and compare it with the other run's baseline bit
    for bit over every step and rank. Recorded as rerun evidence: supported when it names
    hypotheses and every step matches, refuted when a step still differs. A missing rank or
    step, a failed run, or a patch that never took effect is never a match."""
    case = ws.require_launch()
    ws.require_hypotheses(args.hypotheses)
    ivs = [check_untrusted(parse_intervention(t)) for t in args.interventions]
    if any(isinstance(iv, RevertIntervention) for iv in ivs):
        raise InputError("a file revert needs its checkout prepared: use the revert_file tool")
    # a diff is data: it must lie inside the workspace, and is applied to a copy made there
    ivs = [
        PatchIntervention(path=str(ws.path(iv.path, must_exist=True)))
        if isinstance(iv, PatchIntervention)
        else iv
        for iv in ivs
    ]
    ws.output_dir("runs")
    ws.output_dir("interventions")
    progress(0, None, f"rerunning run {args.run} with {len(ivs)} intervention(s)")
    res = intervene(
        case,
        args.run,
        ivs,
        ledger=ws.ledger,
        hypotheses=args.hypotheses,
        timeout_s=args.timeout_s,
        progress=lambda msg: progress(0, None, cap_text(msg, 500)),
    )
    progress(1, 1, res.line)
    out = res.outcome
    warnings = [cap_text(w, 500) for w in out.warnings[:MAX_LIST_ITEMS]]
    # the result's own fields by name, and what the reply says of the rerun's launch
    said = {"argv": out.argv, "seconds": out.seconds, "cached": out.cached, "warnings": warnings}
    return RerunWithInterventionOut.model_validate({**dict(res), **said})
