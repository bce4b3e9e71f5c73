"""A proven setting that selects one of two implementations of one role.

A launch flag that picks a class or a function (``--step-impl fused`` choosing one trainer
step over another, in the same file or another) makes each run call a function of the job's
own that the other run never calls. When the two have the same name (the same method of two
classes, a function of two modules), or each run alone calls just one function (``train_step``
and ``train_step_v2``), the one B calls is the counterpart of the one A calls.
Run B is launched with A's counterpart in place of its own (``replace``), the setting as B
has it: every step matching proves the difference is made inside B's function.

Which functions each run called comes from the job's small values (:mod:`.value_origin`,
both runs launched once). Where inside B's function: the call site in B of the op where the
two runs' op streams first part, when it lies in that function's lines
(:func:`.hunk_sites.op_site`); else its ``def`` line.

Limits: functions of the launched script (``__main__``) cannot be replaced by name; a name
that more than one function of one run carries is left alone, and so are differently named
functions when either run alone calls more than one.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable
from pathlib import Path

from ..ledger import Ledger
from ..records import Case, Classification, Evidence, Hypothesis
from .arms import Arm
from .characterize import MismatchReport
from .hunk_sites import op_site
from .value_origin import _key, recorded


def _called(calls: list[dict], cwd: str | None) -> set[str]:
    return {_key(c["fn"], cwd) for c in calls}


def _module(file: str) -> str | None:
    """``pkg.mod`` of a file under the run's directory; None for a launched script."""
    if not file.endswith(".py") or file.startswith("/"):
        return None
    return file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _end_line(path: Path, first: int) -> int:
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return first
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.lineno == first:
            return node.end_lineno or first
    return first


def counterpart_arms(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    proven: Hypothesis,
    trace_ev: Evidence | None,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> list[Arm]:
    """An arm for each pair of same-named functions of the job's own that only A and only
    B call (each name once per run), noted in the ledger either way."""
    got = recorded(case, ledger, timeout_s=timeout_s, on_status=on_status)
    if got is None:
        return []
    reps_a, reps_b = got
    only_a: set[str] = set()
    only_b: set[str] = set()
    for rank in sorted(set(reps_a) & set(reps_b)):
        a, b = _called(reps_a[rank], case.run_a.cwd), _called(reps_b[rank], case.run_b.cwd)
        only_a |= a - b
        only_b |= b - a
    by_name: dict[str, tuple[list[str], list[str]]] = {}
    for keys, side in ((only_a, 0), (only_b, 1)):
        for k in keys:
            by_name.setdefault(k.rsplit(":", 1)[1].split(".")[-1], ([], []))[side].append(k)
    pairs = [
        (in_a, in_b)
        for name, (in_a, in_b) in sorted(by_name.items())
        if len(in_a) == 1 and len(in_b) == 1 and not name.startswith("<")
    ]
    left_a = sorted(only_a - {p[0][0] for p in pairs})
    left_b = sorted(only_b - {p[1][0] for p in pairs})
    if not pairs and len(left_a) == 1 and len(left_b) == 1:
        # one function each run alone calls, named apart (train_step, train_step_v2): the
        # two implementations of the one role the setting chooses between
        pairs.append((left_a, left_b))
    arms: list[Arm] = []
    for in_a, in_b in pairs:
        file_a, _, qual_a = in_a[0].rpartition(":")
        file_b, _, qual_b = in_b[0].rpartition(":")
        (file_a, line_a), (file_b, line_b) = file_a.rsplit(":", 1), file_b.rsplit(":", 1)
        mod_a, mod_b = _module(file_a), _module(file_b)
        if mod_a is None or mod_b is None or "<locals>" in qual_a + qual_b:
            continue
        first = int(line_b)
        last = _end_line(Path(case.run_b.cwd or ".") / file_b, first)
        site = None
        if trace_ev is not None:
            found = op_site(
                case,
                ledger,
                rep,
                trace_ev,
                lambda f, n, fb=file_b, lo=first, hi=last: f == fb and lo <= n <= hi,
                roles=("structural", "origin", "receiver"),
                timeout_s=timeout_s,
                deadline=deadline,
                on_status=on_status,
            )
            site = found[0] if found else None
        where = site or f"{file_b}:{first}"
        hid = "H-" + hashlib.sha256(f"counterpart|{in_a[0]}|{in_b[0]}".encode()).hexdigest()[:10]
        arms.append(
            Arm(
                hypothesis=Hypothesis(
                    id=hid,
                    statement=f"run B calls {qual_b} ({file_b}:{first}) where run A calls "
                    f"{qual_a} ({file_a}:{line_a}): the setting selects B's implementation, "
                    "and the difference is made inside it"
                    + (f", where the op streams first part ({site})" if site else ""),
                    category="config-defect",
                    rationale=f"{proven.statement}; tested by B with {qual_a} in place of "
                    f"{qual_b}, the setting as B has it",
                    classification=Classification.bug,
                ),
                intervention=f"replace {mod_b}:{qual_b}={mod_a}:{qual_a}",
                run="b",
                kind="config-defect",
                location=f"{where} ({qual_b})",
            )
        )
    ledger.note(
        f"{proven.id} read through the functions each run alone calls (A: "
        f"{', '.join(sorted(k.rsplit(':', 1)[1] for k in only_a)[:5]) or 'none'}; B: "
        f"{', '.join(sorted(k.rsplit(':', 1)[1] for k in only_b)[:5]) or 'none'}): "
        + (
            "; ".join(a.intervention for a in arms[:3])
            if arms
            else "no pair of same-named functions to exchange"
        ),
        counterparts_read=proven.id,
    )
    return arms[:3]


__all__ = ["counterpart_arms"]
