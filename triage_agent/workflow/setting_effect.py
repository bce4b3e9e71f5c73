"""What a proven setting changes in the computation: a policy, or a defect it exposes.

A declared setting (a launch flag, a config key) whose intervention made every step match
carries the whole difference, and the two runs differ in nothing else; the op trace of the
two runs over the step where the difference arises then shows what the setting changes.
The reading takes the first divergent event of that trace (ops of the training steps, the
init phase left out: digests of memory not yet written differ there by themselves):

- the op sequences part (one run executes ops the other does not, or in another order), or
  a paired op reads values both runs computed alike in another order (a sum reordered); every
  op where they differ is arithmetic (adds, products, divisions, norms, sums, casts, views),
  and the first differing metric is within rounding of the other run's (at most
  ``ROUNDING_ULPS``): the same quantity computed in another order or grouping, the
  compatibility policies the RFC names (norm decomposition, accumulation and division order,
  reduction order, cast placement). policy-difference, at the setting.
- the sequences agree and the first differing event is an op with equal tensor inputs whose
  non-tensor arguments differ beyond rounding (a dump of that op in both runs shows them): the
  setting changed a scalar the op is given (a step count, a bias correction, a learning rate
  or scale), a value the arithmetic of both runs shares and that should not depend on the
  setting. A bug, located by walking the enclosing function's definitions back from the op's
  call site to the one write of object state they depend on (a counter advanced in a loop),
  or at the call site when the value comes from its locals and arguments alone.
- no op-level trace of the two runs (the optimizer's update a fused kernel the dispatcher
  does not see): the optimizer's per-parameter counters at the step boundary are read
  instead (:mod:`.state_counter`), a bug at the one flagged statement writing them.
- anything else (a random or atomic op, equal arguments, a first event already receiving
  different inputs, no call site, more than one state write or object state written
  elsewhere, a large metric difference with reordered ops): unknown. The setting stays named; nothing is guessed.
"""

from __future__ import annotations

import ast
import difflib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, Field

from ..compare import load_run, load_runs
from ..compare.classify import artifact_reason, is_view_like
from ..errors import TriageError
from ..evidence_data import TraceCompareData
from ..fingerprint import CaptureConfig
from ..ledger import Ledger
from ..metrics import ulp_distance
from ..records import Case, Classification, Evidence, EvidenceKind, EvidenceResult, Hypothesis
from .characterize import MismatchReport
from .classify import (
    ATOMIC_OPS,
    CLASSIFICATION,
    RANDOM_OPS,
    parse_op,
)
from .stage2 import new_context, trace_and_compare
from .state_counter import counter_writer

# Within this many ulps the first differing metric reads the same quantity rounded otherwise:
# one forward and backward over reordered fp32 arithmetic moves a logged loss or norm by a
# few ulps; a changed counter, scalar or extra update moves it by thousands.
ROUNDING_ULPS = 64.0
# Two Python-float arguments this close are the same value computed in another order.
SCALAR_REL_TOL = 1e-9
# Longest op stream per rank and step window read here (the alignment is quadratic).
MAX_EVENTS = 40_000

# Ops whose result is not a fixed arithmetic function of their inputs' values: they draw,
# select data by index or order, or reduce atomically. Any other ATen op computes a value
# from its inputs in some order, which is what a reordering policy changes.
SELECTING_OPS = frozenset(
    {
        *RANDOM_OPS,
        *ATOMIC_OPS,
        *("gather", "index_select", "index", "take", "masked_select", "nonzero", "embedding"),
        *("sort", "argsort", "topk", "argmax", "argmin", "unique", "_unique2", "kthvalue"),
        *("scatter", "searchsorted", "bucketize"),
    }
)


def is_arithmetic(name: str) -> bool:
    """An ATen op that computes a value from its inputs in some order: no draw, no selection
    by index or order, no atomic reduction, no collective."""
    op = parse_op(name)
    if op is None or op.namespace not in (None, "aten"):
        return False
    return op.base not in SELECTING_OPS


Role = Literal["structural", "reordered", "origin", "receiver"]


class FirstDivergence(BaseModel):
    """The first divergent event of one rank's op streams in the traced training steps."""

    role: Role
    rank: int
    step: int
    order: int = Field(description="position in A's stream (where B's part begins, for B)")
    name: str = Field(description="the first differing op (A's, or B's where A has none)")
    scope: str = ""
    call: int = 0
    caller: str | None = None
    parted: list[str] = Field(
        default_factory=list, description="structural: every op in the step's differing parts"
    )

    @classmethod
    def at(
        cls, ev: Any, role: Role, rank: int, order: int, parted: list[str], partner: Any = None
    ) -> FirstDivergence:
        """The divergence at trace event ``ev``: its step, op, scope and call, and its caller
        (else its partner event's, where the two runs pair it with one)."""
        caller = ev.caller or (partner.caller if partner is not None else None)
        where = {"step": ev.step, "name": ev.name, "scope": ev.scope, "call": ev.call}
        return cls(role=role, rank=rank, order=order, caller=caller, parted=parted, **where)


def _key(ev: Any) -> tuple[str, str]:
    return (ev.scope, ev.name)


def _unreadable(ev: Any) -> bool:
    """A digest that says nothing about the run: memory not yet written, a view (it cannot
    change bits), or a collective hashed when its op returned, before it completed."""
    return artifact_reason(ev) is not None or is_view_like(ev.name) or ev.name.startswith("c10d::")


def first_divergence(rank: int, ea: list[Any], eb: list[Any]) -> FirstDivergence | None:
    """The first place where two op streams (compare ``Ev`` records) differ: a part one run
    executes otherwise, or a paired op whose outputs differ (a difference absorbed on the
    spot, or a digest that says nothing, is passed over)."""
    sm = difflib.SequenceMatcher(None, [_key(e) for e in ea], [_key(e) for e in eb], autojunk=False)
    codes = sm.get_opcodes()
    seen: set[str | None] = {None}  # every output of the equal events so far
    for n, (tag, i1, i2, j1, _j2) in enumerate(codes):
        if tag != "equal":
            ev = ea[i1] if i1 < i2 else eb[j1]
            step = ev.step
            # every part of this step where the sequences differ, up to its end
            parted = [
                e.name
                for t, a1, a2, b1, b2 in codes[n:]
                if t != "equal"
                for e in (*ea[a1:a2], *eb[b1:b2])
                if e.step == step
            ]
            return FirstDivergence.at(ev, "structural", rank, i1, parted)
        for k in range(i2 - i1):
            a, b = ea[i1 + k], eb[j1 + k]
            if a.outputs == b.outputs or _unreadable(a) or _unreadable(b):
                seen.update(a.outputs)
                continue
            role: Role = "origin" if a.inputs == b.inputs else "receiver"
            if role == "receiver" and seen.issuperset(a.inputs) and seen.issuperset(b.inputs):
                # values both runs computed alike, read in another order (a sum reordered)
                role = "reordered"
            parted = [a.name] if role == "reordered" else []
            return FirstDivergence.at(a, role, rank, i1 + k, parted, partner=b)
    return None


def _ops(stream: Any, first_step: int) -> list[Any]:
    return [e for e in stream.events(0, len(stream)) if e.kind == "op" and e.step >= first_step]


def read_traces(dir_a: str, dir_b: str, first_step: int) -> FirstDivergence | None:
    """The earliest first divergence over ranks, in steps from ``first_step`` on."""
    ra, rb = load_runs(dir_a, dir_b)
    found = []
    for rank in sorted(set(ra.ranks) & set(rb.ranks)):
        ea, eb = _ops(ra.ranks[rank], first_step), _ops(rb.ranks[rank], first_step)
        if max(len(ea), len(eb)) > MAX_EVENTS:
            return None
        d = first_divergence(rank, ea, eb)
        if d is not None:
            found.append(d)
    return min(found, key=lambda d: (d.step, d.order, d.rank)) if found else None


def _scalars(x: Any) -> list[Any]:
    """The non-tensor leaves of a dumped call's arguments, in order (a tensor as a marker)."""
    if isinstance(x, torch.Tensor):
        return ["<tensor>"]
    if isinstance(x, (list, tuple)):
        return [s for v in x for s in _scalars(v)]
    if isinstance(x, dict):
        return [s for k in sorted(x) for s in _scalars(x[k])]
    return [x]


def scalars_differ(call_a: dict[str, Any], call_b: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The non-tensor arguments of two dumped calls of one op that differ beyond rounding."""
    sa = _scalars([call_a.get("args", []), call_a.get("kwargs", {})])
    sb = _scalars([call_b.get("args", []), call_b.get("kwargs", {})])
    if len(sa) != len(sb):
        return [(sa, sb)]
    out = []
    for x, y in zip(sa, sb, strict=True):
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=SCALAR_REL_TOL, abs_tol=0.0):
                out.append((x, y))
        elif x != y:
            out.append((x, y))
    return out


class StateWrite(BaseModel):
    file: str
    line: int
    function: str
    text: str


def _loaded(node: ast.AST) -> set[str]:
    """Names and attribute chains (``self.t``) an expression reads."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            chain = _chain(n)
            if chain:
                out.add(chain)
    return out


def _chain(n: ast.AST) -> str | None:
    parts = []
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if isinstance(n, ast.Name):
        return ".".join([n.id, *reversed(parts)])
    return None


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target]
    return []


def _written(t: ast.expr) -> set[str]:
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, ast.Attribute):
        return {c for c in [_chain(t)] if c}
    if isinstance(t, (ast.Tuple, ast.List)):
        return {w for e in t.elts for w in _written(e)}
    return set()


def state_write_behind(file: str, line: int) -> tuple[StateWrite | None, int]:
    """Walk the enclosing function's definitions back from ``line`` (the op's call site):
    which earlier statements the names read there depend on, and among them the writes of
    object state (an attribute assigned or advanced). Returns the one such write and how
    many there were (0: the value is computed from arguments and locals only; -1: it reads
    the object's state and this function writes none of it, or the source cannot be read)."""
    try:
        src = Path(file).read_text()
        tree = ast.parse(src)
    except (OSError, SyntaxError, ValueError):
        return None, -1
    funcs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    if not funcs:
        return None, -1
    fn = max(funcs, key=lambda n: n.lineno)  # the innermost
    stmts = [
        s for s in ast.walk(fn) if isinstance(s, ast.stmt) and s is not fn and hasattr(s, "lineno")
    ]
    at = [s for s in stmts if s.lineno <= line <= (s.end_lineno or s.lineno) and not _targets(s)]
    here = min(at, key=lambda s: (s.end_lineno or s.lineno) - s.lineno) if at else None
    wanted = _loaded(here) if here is not None else set()
    writes: dict[int, StateWrite] = {}
    for s in sorted((s for s in stmts if s.lineno < line and _targets(s)), key=lambda s: -s.lineno):
        names = {w for t in _targets(s) for w in _written(t)}
        if not names & wanted:
            continue
        value = getattr(s, "value", None) if not isinstance(s, (ast.For, ast.AsyncFor)) else s.iter
        wanted |= _loaded(value) if value is not None else set()
        if any("." in w for w in names) and isinstance(s, (ast.AugAssign, ast.Assign)):
            text = ast.get_source_segment(src, s) or ""
            writes[s.lineno] = StateWrite(file=file, line=s.lineno, function=fn.name, text=text)
    if len(writes) == 1:
        return next(iter(writes.values())), 1
    args = fn.args.posonlyargs + fn.args.args
    owner = args[0].arg if args else None
    if not writes and owner and any(w.startswith(owner + ".") for w in wanted):
        return None, -1  # object state written elsewhere: where is not read here
    return None, len(writes)


class SettingReading(BaseModel):
    classification: Classification
    location: str = Field(description="what the verdict names as the cause's location")
    statement: str
    evidence: str | None = None


def _metric_ulps(rep: MismatchReport) -> float:
    ulps = [ulp_distance(m.a, m.b) if m.a and m.b else math.inf for m in rep.diff.mismatches]
    return max(ulps) if ulps else math.inf


def _dumped_call(trace_dir: str, d: FirstDivergence) -> dict[str, Any] | None:
    run = load_run(trace_dir)
    stream = run.ranks.get(d.rank)
    if stream is None:
        return None
    for e in stream.events(0, len(stream)):
        if (e.step, e.scope, e.name, e.call) == (d.step, d.scope, d.name, d.call) and e.dump:
            try:
                return torch.load(Path(trace_dir) / e.dump, weights_only=False)
            except (OSError, RuntimeError, EOFError):
                return None
    return None


def _short(file: str, case: Case) -> str:
    for root in [*case.source_roots, "."]:
        try:
            return str(Path(file).resolve().relative_to(Path(root).resolve()))
        except ValueError:
            continue
    return file


def read_proven_setting(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    hyp: Hypothesis,
    setting: str,
    trace_ev: Evidence,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> SettingReading | None:
    """Read what the proven ``setting`` (its location, ``config:KEY``) changes, from the
    stage-2 op trace of the two runs; None when the evidence cannot tell (said in the
    ledger)."""

    def unknown(why: str) -> None:
        ledger.note(f"{hyp.id}: what {setting} changes is not read: {why}")

    try:
        data = trace_ev.data_as(TraceCompareData)
    except TypeError:
        return unknown("no trace comparison of the two runs")
    if data.level != "op" or set(data.trace_dirs) != {"a", "b"}:
        # no op stream to read: the optimizer's own state at the boundary may still say it
        counter = counter_writer(ledger, data)
        if counter is not None:
            loc, read = counter
            said = f"{setting} exposes a defect: {read}; a value the setting should not change"
            return _record(ledger, hyp, trace_ev, Classification.bug, loc, said)
        return unknown(f"the concluding trace is at {data.level} level, not op level")
    first_step = rep.diff.common_steps[0] if rep.diff.common_steps else 0
    try:
        d = read_traces(data.trace_dirs["a"], data.trace_dirs["b"], first_step)
    except (TriageError, OSError) as exc:
        return unknown(f"the traces cannot be read ({exc})")
    if d is None:
        return unknown("the op streams of the traced training steps agree")
    where = f"rank {d.rank} step {d.step} {d.scope or '<root>'}::{d.name} (call {d.call})"
    ulps = _metric_ulps(rep)
    if d.role in ("structural", "reordered"):
        how = (
            f"the op sequences first part at {where}"
            if d.role == "structural"
            else f"{where} reads values both runs computed alike, in another order"
        )
        odd = sorted({n for n in d.parted if not is_arithmetic(n)})
        if odd:
            return unknown(f"{how}, with non-arithmetic ops {odd[:5]}")
        if ulps > ROUNDING_ULPS:
            return unknown(
                f"{how} (arithmetic only), but the first differing metric is {ulps:g} ulp "
                "apart: beyond rounding"
            )
        ops = sorted(set(d.parted))
        said = (
            f"{setting} reorders or regroups the same arithmetic: {how}, every op where they "
            f"differ is arithmetic ({', '.join(ops[:8])}{', ...' if len(ops) > 8 else ''}), and "
            f"the first differing metric is {ulps:g} ulp apart (rounding): the same quantity "
            "computed in another order, a numerical policy"
        )
        return _record(ledger, hyp, trace_ev, Classification.policy_difference, setting, said)
    if d.role == "receiver":
        return unknown(
            f"the first differing op of the traced steps, {where}, already receives different inputs"
        )
    op = parse_op(d.name)
    if op is None or op.base in RANDOM_OPS or op.base in ATOMIC_OPS:
        return unknown(f"the first divergent op {where} draws random numbers or reduces atomically")
    if not d.caller:
        return unknown(f"the first divergent op {where} has no recorded call site")
    if time.monotonic() >= deadline:
        return unknown("budget reached before dumping the first divergent op")
    ws = Path(ledger.workspace)
    ctx = new_context(
        case, ledger, rep, timeout_s=timeout_s, deadline=deadline, on_status=on_status
    )
    cfg = CaptureConfig(
        out_dir=ws / "unused", steps=(d.step, d.step), level="op", dump=[d.name], digest="both"
    )
    res, ev = trace_and_compare(ctx, cfg, "setting op dump")
    if res is None:
        return unknown(f"the dump of {where} failed ({ev.id})")
    ledger.add_evidence(ev)
    dirs = ev.data_as(TraceCompareData).trace_dirs
    ca, cb = _dumped_call(dirs["a"], d), _dumped_call(dirs["b"], d)
    if ca is None or cb is None or "args" not in ca or "args" not in cb:
        return unknown(f"no call record of {where} in both dumps")
    differ = scalars_differ(ca, cb)
    if not differ:
        return unknown(f"{where} gets equal inputs and equal arguments yet differs")
    file, _, line = d.caller.rpartition(":")
    write, n = state_write_behind(file, int(line)) if line.isdigit() else (None, -1)
    site = f"{_short(file, case)}:{line}"
    if n > 1 or n < 0:
        behind = (
            f"depends on {n} writes of object state: which one is not read"
            if n > 1
            else "depends on object state this function does not write (or its source is unread)"
        )
        return unknown(
            f"the scalar given to {where} at {site} differs ({differ[0][0]!r} vs "
            f"{differ[0][1]!r}) and {behind}"
        )
    shown = ", ".join(f"{a!r} vs {b!r}" for a, b in differ[:3])
    if write is not None:
        loc = f"{_short(write.file, case)}:{write.line} ({write.function}: {write.text})"
        said = (
            f"{setting} exposes a defect: with tensor inputs equal, {where} at {site} is given "
            f"other scalars ({shown}), computed from object state written at {loc}, a value that "
            "should not depend on the setting"
        )
    else:
        loc = site
        said = (
            f"{setting} exposes a defect: with tensor inputs equal, {where} at {site} is given "
            f"other scalars ({shown}), a value that should not depend on the setting"
        )
    return _record(ledger, hyp, ev, Classification.bug, loc, said)


def _record(
    ledger: Ledger,
    hyp: Hypothesis,
    trace_ev: Evidence,
    klass: Classification,
    location: str,
    said: str,
) -> SettingReading:
    category = "config-policy" if klass == Classification.policy_difference else "config-defect"
    note = ledger.add_evidence(
        Evidence(
            hypotheses=[hyp.id],
            kind=EvidenceKind.note,
            result=EvidenceResult.observed,
            summary=f"read from {trace_ev.id}: {said}",
        )
    )
    ledger.update_hypothesis(
        hyp.id,
        category=category,
        classification=CLASSIFICATION[category],
        statement=f"{hyp.statement}; {said}",
    )
    return SettingReading(classification=klass, location=location, statement=said, evidence=note.id)
