"""Whether a traced run is fit to compare: its metric bits against its untraced baseline's.

A capture that changes the run it observes (its metric bits move, it fails, it stops short)
gives a trace of another run; the traced relaunches of stage 2 and the windows cut from a
flight recording are checked the same way.
"""

from __future__ import annotations

from ..metrics import diff_metrics, load_metrics
from ..records import Case
from ..runs import RunOutcome


def is_repeat(case: Case) -> bool:
    """A and B are the same command: any difference between them is run-to-run."""
    return case.run_a.model_dump(exclude={"name"}) == case.run_b.model_dump(exclude={"name"})


def perturbation(
    base: dict[str, str], traced: tuple[RunOutcome, RunOutcome], repeat: bool
) -> list[str]:
    """Compare each traced run's metric bits with its untraced baseline's.

    For a repeat case the baselines already show that one command does not reproduce its
    own bits, so a traced run differing from its baseline says nothing about the capture;
    there the check is that the traced pair still diverges (see :func:`.stage2.trace_and_compare`).
    """
    problems = []
    for out in traced:
        if not out.ok or out.metrics is None:
            problems.append(
                f"traced run {out.run} failed (exit codes {out.exit_codes}; logs {out.logs[-1:]})"
            )
            continue
        if repeat:
            continue
        d = diff_metrics(load_metrics(base[out.run]), load_metrics(out.metrics))
        if d.first_step is not None:
            problems.append(
                f"tracing changed run {out.run}'s own metric bits from step {d.first_step}"
            )
        elif not d.complete:
            problems.append(f"traced run {out.run} stopped short of its baseline ({d.gaps()})")
    return problems
