"""One run fails where the other completes: the failure is the outcome to report.

A crash (or a timeout) of one baseline is a divergence of its own: the workflow reads the
Python traceback the failing run left in its logs, names the innermost frame in code the
job owns or imports (not torch's or the standard library's plumbing), and records it.

Where a run fails is not yet why: an exception is raised where a broken invariant is
noticed, which may be far downstream of the code that broke it (a state fragment linked
too early is found missing only when it is read). So the verdict is ``unknown``, the
failure site named as the first divergence observed, until an intervention that makes the
failing run complete and match proves a cause.

When the runs differ by declared settings, each is tried on the failing run with the other
run's value (:func:`crash_cause`). One that makes it complete and match at every step
proves the setting carries the crash; a crash is never a valid policy, so the difference is
a defect reached through that setting. Its place is named only where the traceback itself
shows where the failing value was made: the failing line is an operation (not a ``raise``
or ``assert`` that checks state made elsewhere) whose every input is a value its own
function built. Otherwise the frame is a detector: the state it read is followed to the
write that made it (:mod:`.writer_watch`), named only when a rerun proves that write; else
the verdict stays ``unknown``, naming the proven setting and the frame where the failure
was noticed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..evidence_data import MetricsData
from ..ledger import Ledger
from ..records import Case, Classification, Evidence, EvidenceKind, EvidenceResult, Verdict
from ..runs import RunOutcome
from .arms import Arm, first_supported, prior_rerun
from .failure import Failure, failure_of, source_tree
from .fixcheck import relaunch_evidence
from .writer_watch import writer_cause


def report_failure(ledger: Ledger, failed: RunOutcome, other: RunOutcome) -> Verdict:
    """Record that one run fails where the other completes, and the unknown verdict naming
    the failure site."""
    f = failure_of(failed)
    where = f.site()
    ev = ledger.add_evidence(
        relaunch_evidence(
            [failed, other],
            EvidenceKind.metrics,
            result=EvidenceResult.observed,
            summary=f"run {failed.run.upper()} fails where run {other.run.upper()} completes: "
            f"{f.error}" + (f" at {where}" if where else ""),
            data=MetricsData(failing_run=failed.run, failure=f.model_dump(), logs=failed.logs),
        )
    )
    v = Verdict(
        classification=Classification.unknown,
        statement=f"run {failed.run.upper()} fails ({f.error})"
        + (f" at {where}" if where else "")
        + f"; run {other.run.upper()} completes. The failure site is where the failure is "
        "noticed, not necessarily what caused it",
        location=where,
        evidence=[ev.id],
        next_action=(
            f"read the code at {where} and what feeds it; " if where else "read the failing log; "
        )
        + f"a cause is proven by an intervention that makes run {failed.run.upper()} complete "
        f"and match run {other.run.upper()} (triage intervene)",
    )
    ledger.set_verdict(v)
    return v


def failed_baseline(outs: tuple[RunOutcome, RunOutcome]) -> tuple[RunOutcome, RunOutcome] | None:
    """(failed, completed) when exactly one baseline failed; None when both ran or both
    failed (a case that cannot run at all is an input error, not a divergence)."""
    a, b = outs
    if a.ok == b.ok:
        return None
    return (b, a) if a.ok else (a, b)


def _enclosing(tree: ast.Module, line: int) -> tuple[ast.AST | None, ast.stmt | None]:
    """The innermost function around ``line`` and the innermost statement starting there."""
    func: ast.AST | None = None
    stmt: ast.stmt | None = None
    for node in ast.walk(tree):
        end = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
        if not hasattr(node, "lineno") or not node.lineno <= line <= end:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if func is None or node.lineno >= func.lineno:  # type: ignore[attr-defined]
                func = node
        elif isinstance(node, ast.stmt) and node.lineno == line:
            stmt = node  # ast.walk is breadth first: the last one is the innermost
    return func, stmt


def made_here(f: Failure) -> str | None:
    """Why the failing line is where the failing value was made, or None when it is not
    shown: the line must be an operation (not a raise or an assert, which check state made
    elsewhere) whose inputs are all names its own function binds by assignment."""
    if not f.file or not f.line:
        return None
    tree = source_tree(f.file)
    func, stmt = _enclosing(tree, f.line) if tree else (None, None)
    if func is None or stmt is None or isinstance(stmt, ast.Raise | ast.Assert):
        return None
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and n.lineno == f.line]
    if not calls:
        return None
    inputs: set[str] = set()
    for c in calls:
        for arg in [*c.args, *(k.value for k in c.keywords)]:
            for n in ast.walk(arg):
                if isinstance(n, ast.Attribute):
                    return None  # state read from an object: made wherever it was written
                if isinstance(n, ast.Name):
                    inputs.add(n.id)
    bound = {
        t.id
        for n in ast.walk(func)
        for t in ast.walk(n)
        if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.For | ast.comprehension)
        and isinstance(t, ast.Name)
        and isinstance(t.ctx, ast.Store)
    }
    if not inputs or not inputs <= bound:
        return None
    return (
        f"the failing operation at {f.file}:{f.line} takes only values its function "
        f"{f.function} builds itself ({', '.join(sorted(inputs))})"
    )


def crash_cause(
    case: Case,
    ledger: Ledger,
    failed: RunOutcome,
    other: RunOutcome,
    declared: list[Arm],
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Verdict | None:
    """Try each declared difference on the failing run with the other run's value; the
    verdict when one makes it complete and match (see the module docstring)."""
    f = failure_of(failed)

    def writer(arm: Arm | None, proof: Evidence | None) -> Verdict | None:
        return writer_cause(
            case,
            ledger,
            failed,
            other,
            f,
            arm,
            proof,
            timeout_s=timeout_s,
            deadline=deadline,
            on_status=on_status,
        )

    mine = [a for a in declared if a.run == failed.run]
    hyp = None
    if mine:
        hyp = first_supported(
            case,
            ledger,
            mine,
            timeout_s=timeout_s,
            deadline=deadline,
            what="declared differences carrying the failure",
            on_status=on_status,
        )
    if hyp is None:
        return None if made_here(f) else writer(None, None)
    arm = next(a for a in mine if a.hypothesis.id == hyp.id)
    proof = prior_rerun(ledger, hyp.id)
    who, them = failed.run.upper(), other.run.upper()
    carried = (
        f"run {who} fails ({f.error}) at {f.site() or 'an unknown frame'}; with "
        f"{arm.intervention} it completes and matches run {them} at every step: the setting "
        "carries the failure, and a failure is no policy"
    )
    why = made_here(f)
    evidence = [e for e in (proof.id if proof else None,) if e]
    if why is None:
        found = writer(arm, proof)
        if found is not None:
            return found
        v = Verdict(
            hypothesis=hyp.id,
            classification=Classification.unknown,
            statement=f"{carried}. The failing frame checks state made elsewhere (or its "
            "inputs come from outside it), so it is where the failure is noticed, not shown "
            "to be its cause",
            location=f"{arm.location}; failure noticed at {f.site()}" if f.site() else arm.location,
            evidence=evidence,
            next_action=f"find where the state read at {f.site()} is written on the path "
            f"{arm.location} selects; a cause is proven by an intervention on that writer",
        )
    else:
        v = Verdict(
            hypothesis=hyp.id,
            classification=Classification.bug,
            statement=f"{carried}: it is a defect on the path the setting selects, at the "
            f"failing operation; {why}",
            location=f"{f.site()}; reached through {arm.location}",
            evidence=evidence,
            next_action=f"make {f.function} handle what it is given there (validated: "
            f"{proof.summary if proof else arm.intervention})",
        )
    ledger.set_verdict(v)
    return v
