"""Where the state a failure reads was written wrongly, not where the failure noticed it.

A run that dies in a ``raise`` or an ``assert`` dies where a broken invariant is noticed:
the state it checks was written earlier, elsewhere. From the failing frames this module
takes the object whose state was read (a method's ``self``) and the attributes the failing
statement and the conditions around it read, and reruns with a write watch on that class
(:mod:`.write_recorder`, injected through the bootstrap): each write to those attributes is
recorded with its value's shape and the frames it came through, and the crash says which
object the failure read, so the write it last received is the one whose value failed.

That write is followed outward to the frame that chose the value: past the object's own
methods (a setter writes what it is given) and past functions that only pass their own
arguments on; the first frame whose call reads state of its own (an attribute of ``self``,
a value it computed) is where the value was taken. That frame is named only when a rerun
proves it: the failing run rerun, watched, under the declared setting already proven to make
it complete and match the other run at every step, no longer makes that write (the setting
moves it) or makes it with another value. Without such a setting, suppressing that frame's
function in the failing run must make it complete and match. Otherwise the verdict stays
where the failure was noticed, ``unknown``.

Limits: only attributes of a method's ``self`` are followed (an object reached through
another is not); writes through ``object.__setattr__`` or into a container the attribute
holds are not seen; the failing run must die of an exception its interpreter prints.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..boundary_capture import read_reports
from ..evidence_data import ManifestData
from ..interventions import compare_runs, parse_intervention, prepare
from ..ledger import Ledger
from ..records import Case, Classification, Evidence, EvidenceKind, EvidenceResult, Verdict
from ..runs import LaunchChanges, RunOutcome, materialize
from .arms import Arm, try_arm
from .failure import Failure, plumbing, source_tree
from .structural import _arm
from .write_recorder import WATCH_ENV, Frame, WatchConfig, WatchReport, WatchTarget, WriteRecord

INJECT_DIR = Path(__file__).resolve().parent.parent / "boundary_inject"
MAX_FRAMES_READ = 3


def module_of(file: str, roots: list[str]) -> str | None:
    """The dotted module a file is imported as, from the import roots it lies under."""
    p = os.path.abspath(file)
    for root in sorted({os.path.abspath(r) for r in roots if r}, key=len, reverse=True):
        if not p.startswith(root.rstrip("/") + "/") or not p.endswith(".py"):
            continue
        parts = list(Path(p[len(root.rstrip("/")) + 1 : -3]).parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        if parts and all(s.isidentifier() for s in parts):
            return ".".join(parts)
    return None


def shown(file: str, cwd: str | None) -> str:
    """A path both runs name alike: inside site-packages, or relative to the run's cwd."""
    f = file.replace("\\", "/")
    if "/site-packages/" in f:
        return f.rsplit("/site-packages/", 1)[1]
    root = (cwd or "").rstrip("/") + "/"
    return f[len(root) :] if cwd and f.startswith(root) else f


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]]]:
    """Every function with the names of the classes around it, outermost first."""
    out = []

    def walk(node: ast.AST, classes: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, [*classes, child.name])
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((child, classes))
                walk(child, classes)
            else:
                walk(child, classes)

    walk(tree, [])
    return out


def _function_at(file: str, line: int):
    """(function node, its class path) of the innermost function around ``line``."""
    tree = source_tree(file)
    if tree is None:
        return None, []
    around = [(f, c) for f, c in _functions(tree) if f.lineno <= line <= (f.end_lineno or 0)]
    return max(around, key=lambda fc: fc[0].lineno) if around else (None, [])


def _statement_at(func: ast.AST, line: int) -> ast.stmt | None:
    spans = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.stmt)
        and not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return min(spans, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if spans else None


def _self_reads(node: ast.AST, me: str) -> set[str]:
    """Attributes of ``me`` that ``node`` reads as state (not a method it calls)."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == me
        and isinstance(n.ctx, ast.Load)
        and id(n) not in called
    }


def read_at(file: str, line: int) -> tuple[str, list[str]] | None:
    """(class path, attributes of self) a method's failing line and the conditions around it
    read, the conditions' first (they decided that the line fails), or None when the line is
    not in a method or reads no state of ``self``."""
    func, classes = _function_at(file, line)
    if func is None or not classes or not func.args.args:
        return None
    me = func.args.args[0].arg
    tested: set[str] = set()
    for n in ast.walk(func):  # the tests that decided this line runs
        if isinstance(n, ast.If | ast.While | ast.Assert) and n.lineno <= line <= (
            n.end_lineno or n.lineno
        ):
            tested |= _self_reads(n.test, me)
    stmt = _statement_at(func, line)
    rest = (_self_reads(stmt, me) if stmt is not None else set()) - tested
    attrs = [*sorted(tested), *sorted(rest)]
    return (".".join(classes), attrs) if attrs else None


def implicated(f: Failure, roots: list[str]) -> list[WatchTarget]:
    """The classes and attributes the failing frames read, innermost frame first."""
    sites = [(f.file, f.line)] if f.file and f.line else []
    for fr in reversed(f.frames):
        file, _, line = fr.rpartition(":")
        if line.isdigit() and not plumbing(file) and (file, int(line)) not in sites:
            sites.append((file, int(line)))
    out: list[WatchTarget] = []
    for file, line in sites[:MAX_FRAMES_READ]:
        got = read_at(file, line)
        mod = module_of(file, roots)
        if got is not None and mod is not None:
            out.append(WatchTarget(module=mod, qualname=got[0], attrs=got[1]))
    return out


def _passes_through(frame: Frame) -> bool:
    """Whether the frame's call only hands on its own function's arguments (or a part of
    them): the value was taken further out."""
    func, classes = _function_at(frame.file, frame.line)
    stmt = _statement_at(func, frame.line) if func is not None else None
    if stmt is None:
        return False
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    if classes and func.args.args:
        params.discard(func.args.args[0].arg)  # self: its state is read here, not handed on
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        values = [stmt.value] if stmt.value is not None else []
    else:
        calls = [
            n
            for n in ast.walk(stmt)
            if isinstance(n, ast.Call) and n.lineno <= frame.line <= (n.end_lineno or n.lineno)
        ]
        values = [v for c in calls for v in [*c.args, *(k.value for k in c.keywords)]]
    if not values:
        return False
    for v in values:
        for n in ast.walk(v):
            if isinstance(n, ast.Call | ast.BinOp | ast.Compare | ast.Lambda):
                return False
            if isinstance(n, ast.Name) and n.id not in params:
                return False
    return True


def origin_frame(write: WriteRecord, target: WatchTarget) -> Frame | None:
    """The frame that chose the value written (see the module docstring)."""
    for f in write.stack:
        if plumbing(f.file) or "/triage_agent/" in f.file.replace("\\", "/"):
            continue
        if f.module == target.module and f.function.startswith(target.qualname + "."):
            continue  # the object's own method writes what it is given
        if _passes_through(f):
            continue
        return f
    return None


def watched(
    case: Case,
    ledger: Ledger,
    run: str,
    interventions: list[str],
    targets: list[WatchTarget],
    *,
    timeout_s: float,
    on_status: Callable[[str], None],
) -> tuple[RunOutcome, list[WatchReport]]:
    """One run relaunched with the write watch, and the interventions given."""
    ws = Path(ledger.workspace)
    spec = case.run_a if run == "a" else case.run_b
    policies: list[str] = []
    changes = LaunchChanges()
    if interventions:
        prepared = prepare(case, run, [parse_intervention(t) for t in interventions], workspace=ws)
        spec, policies, changes = prepared.run, prepared.policies, prepared.changes
    tag = hashlib.sha256(
        (run + "|".join(interventions) + "|".join(t.name for t in targets)).encode()
    ).hexdigest()[:10]
    d = (ws / "writes" / f"{run}-{tag}").resolve()
    d.mkdir(parents=True, exist_ok=True)
    for p in d.glob("writes-*"):
        p.unlink()  # a report of an earlier attempt must not pair with this one
    cfg = d / "watch.json"
    cfg.write_text(WatchConfig(targets=targets, out_dir=str(d)).model_dump_json())
    pp = spec.env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
    changes.env[WATCH_ENV] = str(cfg)
    changes.env["PYTHONPATH"] = str(INJECT_DIR) + (os.pathsep + pp if pp else "")
    on_status(f"write watch on run {run.upper()}: {', '.join(t.name for t in targets)}")
    out = materialize(
        spec,
        ws,
        f"writes-{tag}",
        policies=policies,
        timeout_s=timeout_s,
        reuse=False,
        progress=on_status,
        changes=changes,
    )
    return out, read_reports(d, "writes-*.json", WatchReport)


def _at(f: Frame, cwd: str | None) -> str:
    return f"{shown(f.file, cwd)}:{f.line} ({f.function})"


def _site(f: Frame, cwd: str | None) -> str:
    return f"{shown(f.file, cwd)}:{f.line}"


def _culprit(reports: list[WatchReport]) -> tuple[WriteRecord, str] | None:
    """The write the failing object last received, and what the crash said."""
    for rep in reports:
        if rep.crash is not None and rep.crash.last:
            attr = next(iter(rep.crash.last))  # in the watch's order: the tested state first
            return rep.crash.last[attr], rep.crash.error
    return None


def writer_cause(
    case: Case,
    ledger: Ledger,
    failed: RunOutcome,
    other: RunOutcome,
    failure: Failure,
    proven: Arm | None,
    proof: Evidence | None,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Verdict | None:
    """The verdict naming the frame that wrote the state the failure read, when a rerun
    proves it (see the module docstring); None when nothing was proven."""
    cwd = failed.cwd
    targets = implicated(failure, [*sys.path, cwd or ""])
    if not targets:
        ledger.note(
            f"write watch not applicable: the failing frames {failure.site()} read no "
            "attribute of a method's object"
        )
        return None
    run, them = failed.run, other.run
    if time.monotonic() >= deadline:
        return None
    b_out, b_reps = watched(
        case, ledger, run, [], targets, timeout_s=timeout_s, on_status=on_status
    )
    got = _culprit(b_reps)
    if b_out.ok or got is None:
        why = "it completed" if b_out.ok else "no watched object was read where it failed"
        ledger.note(f"write watch on run {run.upper()} names no write: {why}", level="warning")
        return None
    write, error = got
    target = next(t for t in targets if t.name == write.cls)
    origin = origin_frame(write, target)
    if origin is None:
        ledger.note(f"write watch: the write to {write.cls}.{write.attr} has no frame of its own")
        return None
    where = _at(origin, cwd)
    said = [
        f"run {run.upper()} fails ({error}) reading {write.cls}.{write.attr}, last written "
        f"{write.value} at {_site(write.stack[0], cwd)}, its value taken at {where}"
    ]
    ref_ivs = [proven.intervention] if proven is not None else []
    if time.monotonic() >= deadline:
        return None
    ref_run = run if proven is not None else them
    r_out, r_reps = watched(
        case, ledger, ref_run, ref_ivs, targets, timeout_s=timeout_s, on_status=on_status
    )
    ref_said = f"run {ref_run.upper()}" + (f" with {proven.intervention}" if proven else "")
    same = [
        w
        for rep in r_reps
        for w in rep.writes
        if w.cls == write.cls
        and w.attr == write.attr
        and any(_site(f, r_out.cwd) == _site(origin, cwd) for f in w.stack)
    ]
    moved = not same
    changed = moved or all(w.value != write.value for w in same)
    if not r_out.ok:
        said.append(f"{ref_said} fails too ({r_out.error}): nothing is proven")
    elif moved:
        said.append(f"{ref_said} completes and makes no write through {where}")
    else:
        values = sorted({w.value for w in same})
        said.append(
            f"{ref_said} completes and writes through {where} "
            + ("only " if changed else "")
            + ", ".join(values[:3])
        )
    ev = ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.manifest,
            result=EvidenceResult.observed,
            summary="write watch: " + "; ".join(said),
            hypotheses=[proven.hypothesis.id] if proven else [],
            data=ManifestData(
                differences=said,
                writes={
                    f"{run} watched": [write.model_dump()],
                    f"{ref_run} watched": [w.model_dump() for rep in r_reps for w in rep.writes][
                        :50
                    ],
                },
                records={run: b_out.out_dir, f"{ref_run} watched": r_out.out_dir},
            ),
        )
    )
    if not r_out.ok or not changed:
        return None
    if proven is not None:
        match = compare_runs(case, other, r_out) if run == "b" else compare_runs(case, r_out, other)
        if not match.all_match or proof is None:
            ledger.note(f"write watch: {ref_said}, watched, does not match: {match.said()}")
            return None
        return _verdict(
            ledger,
            proven.hypothesis.id,
            f"{said[0]}; {said[1]} and matches run {them.upper()} ({match.said()}): the "
            f"setting {proven.location} moves the write the failure read",
            f"{where}; reached through {proven.location}",
            [proof.id, ev.id],
            f"make {origin.function} take the value once it exists (validated: {proof.summary})",
        )
    return _suppress_proof(case, ledger, run, origin, where, said, ev, timeout_s, on_status)


def _suppress_proof(
    case: Case,
    ledger: Ledger,
    run: str,
    origin: Frame,
    where: str,
    said: list[str],
    ev: Evidence,
    timeout_s: float,
    on_status: Callable[[str], None],
) -> Verdict | None:
    """Without a proven setting: suppressing the writing frame's function in the failing
    run must make it complete and match."""
    if origin.module in ("", "__main__") or "<" in origin.function:
        ledger.note(f"write watch: {where} is in the script itself, no patch reaches it")
        return None
    arm = _arm(
        run,
        f"suppress {origin.module}:{origin.function}",
        where,
        f"{said[0]}: the write {origin.function} makes there breaks the state the failure reads",
        "a write watch on the object the failure read; suppressing the writer tests it",
    )
    rerun = try_arm(case, ledger, arm, timeout_s=timeout_s, on_status=on_status)
    if rerun is None or rerun.result != EvidenceResult.supported:
        return None
    return _verdict(
        ledger,
        arm.hypothesis.id,
        f"{said[0]}; with {arm.intervention} run {run.upper()} completes and matches",
        where,
        [rerun.id, ev.id],
        f"correct the write {origin.function} makes (validated: {rerun.summary})",
    )


def _verdict(
    ledger: Ledger, hyp: str, statement: str, location: str, evidence: list[str], fix: str
) -> Verdict:
    v = Verdict(
        hypothesis=hyp,
        classification=Classification.bug,
        statement=statement + "; a failure is no policy",
        location=location,
        evidence=evidence,
        next_action=fix,
    )
    ledger.set_verdict(v)
    return v
