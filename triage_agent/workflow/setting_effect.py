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
from .declared import PRECISIONS, uncontrolled
from .situation import same_program
from .stage2 import new_context, trace_and_compare
from .state_counter import counter_writer
from .value_origin import said as origin_said
from .value_origin import value_origin

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


# Collectives that sum the ranks' buffers (in the order the backend chooses: another
# association of the same numbers) or that copy them whole from rank to rank: a gradient
# sent in another dtype or bucketing is the same quantity computed otherwise.
ARITHMETIC_COLLECTIVES = frozenset(
    {
        *("allreduce_", "allreduce_coalesced_", "reduce_", "reduce_scatter_"),
        *("_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_"),
        *("allgather_", "_allgather_base_", "allgather_into_tensor_coalesced_", "broadcast_"),
    }
)


def is_arithmetic(name: str) -> bool:
    """An op that computes a value from its inputs in some order: an ATen op with no draw,
    no selection by index or order and no atomic reduction, or a collective that sums or
    copies the ranks' buffers (:data:`ARITHMETIC_COLLECTIVES`)."""
    op = parse_op(name)
    if op is None:
        return False
    if op.namespace == "c10d":
        return op.op in ARITHMETIC_COLLECTIVES
    return op.namespace in (None, "aten") and op.base not in SELECTING_OPS


Role = Literal["structural", "reordered", "origin", "receiver", "compiled"]


class CompiledRegion(BaseModel):
    """One call of a module one run compiles (torch.compile) and the other runs eagerly: the
    ops each run shows inside it. The compiled run's generated kernels are below the
    dispatcher; what it shows there are the ops its compiled code still dispatches."""

    step: int
    scope: str = Field(description="the module's scope, where both runs call it")
    module: str = Field(description="the class of the module it compiles")
    compiled_in: Literal["a", "b"]
    ops_a: list[str] = Field(default_factory=list)
    ops_b: list[str] = Field(default_factory=list)
    inputs_equal: bool | None = Field(default=None, description="its forward inputs, compared")
    outputs_equal: bool | None = None


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
    caller_b: str | None = Field(
        default=None, description="the paired op's call site in B, where the two runs pair it"
    )
    parted: list[str] = Field(
        default_factory=list, description="structural: every op in the step's differing parts"
    )
    parted_dtypes: list[str] = Field(
        default_factory=list, description="the dtypes of the tensors those ops read and write"
    )
    regions: list[CompiledRegion] = Field(
        default_factory=list,
        description="compiled regions of the step, set aside from the op streams: ops one run "
        "executes inside a region are not missing from the other, which ran them compiled",
    )
    in_b: tuple[str, str, int] | None = Field(
        default=None,
        description="structural: B's first op of its differing part (scope, op, call), where B "
        "has one",
    )

    @classmethod
    def at(
        cls,
        ev: Any,
        role: Role,
        rank: int,
        order: int,
        parted: list[str],
        partner: Any = None,
        dtypes: list[str] | None = None,
    ) -> FirstDivergence:
        """The divergence at trace event ``ev``: its step, op, scope and call, and its caller
        (else its partner event's, where the two runs pair it with one)."""
        caller = ev.caller or (partner.caller if partner is not None else None)
        where = {"step": ev.step, "name": ev.name, "scope": ev.scope, "call": ev.call}
        return cls(
            role=role,
            rank=rank,
            order=order,
            caller=caller,
            caller_b=partner.caller if partner is not None else None,
            parted=parted,
            parted_dtypes=dtypes or [],
            **where,
        )


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
    codes = _opcodes(ea, eb)
    seen: set[str | None] = {None}  # every output of the equal events so far
    for n, (tag, i1, i2, j1, j2) in enumerate(codes):
        if tag != "equal":
            ev = ea[i1] if i1 < i2 else eb[j1]
            parted = _parted(codes[n:], ea, eb, ev.step)
            dtypes = _parted_dtypes(codes[n:], ea, eb, ev.step)
            d = FirstDivergence.at(ev, "structural", rank, i1, parted, dtypes=dtypes)
            # B's first op of its part that computes (a view only aliases); where B runs
            # nothing there (A runs ops B skips), the op B goes on with instead
            part_b = eb[j1:j2] if j1 < j2 else [e for e in eb[j1:] if e.step == ev.step]
            b = next((e for e in part_b if not is_view_like(e.name)), None)
            if b is not None:
                d.in_b = (b.scope, b.name, b.call)
                d.caller_b = b.caller
            return d
        for k in range(i2 - i1):
            a, b = ea[i1 + k], eb[j1 + k]
            if a.outputs == b.outputs or _unreadable(a) or _unreadable(b):
                seen.update(a.outputs)
                continue
            role: Role = "origin" if a.inputs == b.inputs else "receiver"
            if role == "receiver" and (
                (seen.issuperset(a.inputs) and seen.issuperset(b.inputs))
                or _same_calls_reordered(a, b, ea, eb)
            ):
                # values both runs computed alike, read in another order (a sum reordered),
                # or the same op given the same values in another order (a loop over a set)
                role = "reordered"
            parted = [a.name] if role == "reordered" else []
            dtypes = _dtypes((a, b)) if role == "reordered" else []
            return FirstDivergence.at(a, role, rank, i1 + k, parted, partner=b, dtypes=dtypes)
    return None


def _same_calls_reordered(a: Any, b: Any, ea: list[Any], eb: list[Any]) -> bool:
    """Each run's op reads what the other run's calls of the same op in that step read: the
    same calls, made in another order."""

    def read_by(stream: list[Any], like: Any) -> set[str | None]:
        return {i for e in stream if e.step == like.step and e.name == like.name for i in e.inputs}

    return set(a.inputs) <= read_by(eb, a) and set(b.inputs) <= read_by(ea, b)


def _opcodes(ea: list[Any], eb: list[Any]) -> list[tuple[str, int, int, int, int]]:
    keys_a, keys_b = [_key(e) for e in ea], [_key(e) for e in eb]
    return difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes()


def _parted(codes: list[tuple[str, int, int, int, int]], ea: list[Any], eb: list[Any], step: int):
    """Every op of ``step`` in the parts where the sequences differ."""
    return [
        e.name
        for t, a1, a2, b1, b2 in codes
        if t != "equal"
        for e in (*ea[a1:a2], *eb[b1:b2])
        if e.step == step
    ]


def _parted_dtypes(
    codes: list[tuple[str, int, int, int, int]], ea: list[Any], eb: list[Any], step: int
) -> list[str]:
    """The dtypes of the tensors the ops of ``step`` in the differing parts read and write."""
    parts = [
        e
        for t, a1, a2, b1, b2 in codes
        if t != "equal"
        for e in (*ea[a1:a2], *eb[b1:b2])
        if e.step == step
    ]
    return _dtypes(parts)


def _dtypes(events: Any) -> list[str]:
    return sorted(
        {
            sig.split("[", 1)[0]
            for e in events
            for sig in (*e.inputs, *e.outputs)
            if sig and "[" in sig
        }
    )


# mantissa bits of the floating dtypes a step computes in: a difference within rounding of
# the narrowest is measured in its ulps, not the metric's
MANTISSA = {"float64": 52, "float32": 23, "bfloat16": 7, "float16": 10}


def rounding_bound(dtypes: list[str]) -> tuple[float, str]:
    """The metric distance (in float32 ulps) that is still rounding, when the differing ops
    compute in ``dtypes``: ROUNDING_ULPS of the narrowest floating dtype among them."""
    narrow = min((d for d in dtypes if d in MANTISSA), key=MANTISSA.get, default="float32")
    bits = min(MANTISSA[narrow], MANTISSA["float32"])
    return ROUNDING_ULPS * 2.0 ** (MANTISSA["float32"] - bits), narrow


def _within(scope: str, region: str) -> bool:
    return region == "" or scope == region or scope.startswith(region + ".")


Marks = dict[tuple[int, str], tuple[str, set[str], Literal["a", "b"]]]


def _region_marks(fa: list[Any], fb: list[Any]) -> Marks:
    """(step, scope) of every compiled module call one run records -> the class it compiles,
    the names its module events carry there (the compiled wrapper's in the compiled run,
    that class in the eager one: the wrapper stands where the module runs), and the run."""
    marks: Marks = {}
    sides: dict[tuple[int, str], set[str]] = {}
    for side, events in (("a", fa), ("b", fb)):
        for e in events:
            cls = (e.meta or {}).get("compiled") if e.kind == "module" else None
            if isinstance(cls, str) and cls:
                marks.setdefault((e.step, e.scope), (cls, set(), side))[1].update({e.name, cls})
                sides.setdefault((e.step, e.scope), set()).add(side)
    # compiled in both runs, the region's ops are the same program's: compared one by one
    return {k: v for k, v in marks.items() if len(sides[k]) == 1}


def _inside(events: list[Any], marks: Marks) -> dict[int, int]:
    """Positions of the events that run inside a marked module call -> that call's position:
    in forward, the events of the module's scope before its (post-call) event, back to where
    the call began; in backward, from its output's gradient on, while ops stay in its scope."""
    inside: dict[int, int] = {}
    for i, e in enumerate(events):
        if e.kind != "module" or e.name not in marks.get((e.step, e.scope), ("", ()))[1]:
            continue
        step, region = e.step, e.scope
        j, back = (i - 1, -1) if e.phase == "forward" else (i + 1, 1)
        while 0 <= j < len(events):
            f = events[j]
            if f.step != step or f.phase != e.phase or not _within(f.scope, region):
                break
            if back < 0 and f.kind == "module" and f.scope == region:
                break  # the end of an earlier call of the same module
            inside.setdefault(j, i)
            j += back
    return inside


def _regions(fa: list[Any], fb: list[Any], in_a: dict, in_b: dict, marks: Marks) -> list:
    """The compiled regions of the two streams, with the ops each run shows inside."""
    found = {
        (step, scope): CompiledRegion(step=step, scope=scope, module=cls, compiled_in=side)
        for (step, scope), (cls, _, side) in marks.items()
    }
    for events, inside, side in ((fa, in_a, "a"), (fb, in_b, "b")):
        for j, i in inside.items():
            e, owner = events[j], events[i]
            region = found.get((owner.step, owner.scope))
            if region is not None and e.kind == "op":
                getattr(region, f"ops_{side}").append(e.name)
    for (step, scope), region in found.items():
        calls = [
            [e for e in events if e.kind == "module" and e.phase == "forward"
             and (e.step, e.scope) == (step, scope) and e.name in marks[(step, scope)][1]]
            for events in (fa, fb)
        ]  # fmt: skip
        if calls[0] and len(calls[0]) == len(calls[1]):
            region.inputs_equal = all(a.inputs == b.inputs for a, b in zip(*calls, strict=True))
            region.outputs_equal = all(a.outputs == b.outputs for a, b in zip(*calls, strict=True))
    return sorted(found.values(), key=lambda r: (r.step, r.scope))


def first_divergence_of(rank: int, fa: list[Any], fb: list[Any]) -> FirstDivergence | None:
    """The first divergence of two whole event streams (module and op events), where a module
    call one run compiles is set aside in both: the ops either run shows inside it are that
    region's, compared as one (the region), not op by op. The ops outside every region are
    read as :func:`first_divergence` reads them, so an op one run lacks there stays
    structural; a region that comes first is the first divergence, with every op of its
    step where the sequences outside the regions differ."""
    marks = _region_marks(fa, fb)
    in_a, in_b = _inside(fa, marks), _inside(fb, marks)
    ea = [e for j, e in enumerate(fa) if e.kind == "op" and j not in in_a]
    eb = [e for j, e in enumerate(fb) if e.kind == "op" and j not in in_b]
    d = first_divergence(rank, ea, eb)
    regions = [r for r in _regions(fa, fb, in_a, in_b, marks) if r.ops_a or r.ops_b]
    if not regions:
        return d
    first = regions[0]
    start = min((fa[j].index for j, i in in_a.items() if fa[i].step == first.step), default=-1)
    order = sum(1 for e in ea if e.index < start)  # where the region begins among A's ops
    if d is not None and (d.step, d.order) < (first.step, order):
        return d  # a divergence before the region: the region is not the first
    codes = _opcodes(ea, eb)
    parted = _parted(codes, ea, eb, first.step)
    dtypes = _parted_dtypes(codes, ea, eb, first.step)
    if d is not None and d.role == "origin":
        parted.append(d.name)  # equal inputs, other outputs, outside the region: not its doing
    return FirstDivergence(
        role="compiled",
        rank=rank,
        step=first.step,
        order=order,
        name=first.module,
        scope=first.scope,
        parted=parted,
        parted_dtypes=dtypes,
        regions=[r for r in regions if r.step == first.step],
    )


def _events(stream: Any, first_step: int) -> list[Any]:
    return [e for e in stream.events(0, len(stream)) if e.step >= first_step]


def read_traces(dir_a: str, dir_b: str, first_step: int) -> FirstDivergence | None:
    """The earliest first divergence over ranks, in steps from ``first_step`` on."""
    ra, rb = load_runs(dir_a, dir_b)
    found = []
    for rank in sorted(set(ra.ranks) & set(rb.ranks)):
        fa, fb = _events(ra.ranks[rank], first_step), _events(rb.ranks[rank], first_step)
        if max(len(fa), len(fb)) > MAX_EVENTS:
            return None
        d = first_divergence_of(rank, fa, fb)
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


def object_call(file: str, line: int, op: str) -> str | None:
    """'X.m' when the statement at ``line`` is a call of a method ``m`` of one of the job's
    objects ``X`` (a name no import binds) and no call in the statement is the op itself:
    the op then runs inside that method, on the object's state."""
    try:
        tree = ast.parse(Path(file).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    imported = {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    base = op.split("::")[-1].split(".")[0].rstrip("_")
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Expr) and n.lineno <= line <= (n.end_lineno or n.lineno)):
            continue
        call = n.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        called = {
            (c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", ""))
            for c in ast.walk(n)
            if isinstance(c, ast.Call)
        }
        if base in {c.rstrip("_") for c in called}:
            return None  # the statement issues the op itself (a nested tensor method call)
        owner = _chain(call.func.value)
        if owner is None or owner.split(".")[0] in imported:
            continue
        if call.func.attr.rstrip("_") != base:
            return f"{owner}.{call.func.attr}"
    return None


class SettingReading(BaseModel):
    classification: Classification
    location: str = Field(description="what the verdict names as the cause's location")
    statement: str
    evidence: str | None = None


def _metric_ulps(rep: MismatchReport) -> float:
    ulps = [ulp_distance(m.a, m.b) if m.a and m.b else math.inf for m in rep.diff.mismatches]
    return max(ulps) if ulps else math.inf


def _event_at(trace_dir: str, d: FirstDivergence, want: str, *, b: bool = False) -> Any:
    """The event of one run's trace at the divergence (its step, scope, op and call; with
    ``b``, B's first op of its differing part where the divergence records one) that carries
    ``want`` ("dump" or "caller"), or None."""
    run = load_run(trace_dir)
    stream = run.ranks.get(d.rank)
    if stream is None:
        return None
    scope, name, call = d.in_b if b and d.in_b is not None else (d.scope, d.name, d.call)
    for e in stream.events(0, len(stream)):
        if (e.step, e.scope, e.name, e.call) == (d.step, scope, name, call) and getattr(e, want):
            return e
    return None


def _dumped_call(trace_dir: str, d: FirstDivergence) -> dict[str, Any] | None:
    e = _event_at(trace_dir, d, "dump")
    if e is None:
        return None
    try:
        return torch.load(Path(trace_dir) / e.dump, weights_only=False)
    except (OSError, RuntimeError, EOFError):
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
    values: tuple[Any, Any] | None = None,
) -> SettingReading | None:
    """Read what the proven ``setting`` (its location, ``config:KEY``) changes, from the
    stage-2 op trace of the two runs; None when the evidence cannot tell (said in the
    ledger). ``values``: the setting's value in A and in B, when the runs declare them."""

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
    if d.role == "compiled":
        return _read_compiled(ledger, hyp, trace_ev, setting, d, ulps, unknown)
    if d.role in ("structural", "reordered"):
        how = (
            f"the op sequences first part at {where}"
            if d.role == "structural"
            else f"{where} reads values both runs computed alike, in another order"
        )
        odd = sorted({n for n in d.parted if not is_arithmetic(n)})
        if odd:
            return unknown(f"{how}, with non-arithmetic ops {odd[:5]}")
        if uncontrolled(setting):
            return _read_uncontrolled_order(
                case,
                ledger,
                rep,
                hyp,
                setting,
                d,
                how,
                trace_ev,
                timeout_s,
                deadline,
                on_status,
                unknown,
            )
        bound, narrow = rounding_bound(d.parted_dtypes)
        if ulps > bound:
            return unknown(
                f"{how} (arithmetic only), but the first differing metric is {ulps:g} ulp "
                f"apart: beyond rounding of {narrow}, the narrowest dtype those ops compute in"
            )
        ops = sorted(set(d.parted))
        within = (
            "rounding" if narrow == "float32" else f"rounding of {narrow}, which they compute in"
        )
        said = (
            f"{setting} reorders or regroups the same arithmetic: {how}, every op where they "
            f"differ is arithmetic ({', '.join(ops[:8])}{', ...' if len(ops) > 8 else ''}), and "
            f"the first differing metric is {ulps:g} ulp apart ({within}): the same quantity "
            "computed in another order or precision, a numerical policy"
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
    if all(_precision_name(x) and _precision_name(y) for x, y in differ):
        # the op is handed a dtype: the setting chose the precision it computes in
        said = (
            f"{setting} chooses the precision of the arithmetic: with tensor inputs equal, "
            f"{where} is handed another dtype ({differ[0][0]!r} in A, {differ[0][1]!r} in B), a "
            "numerical policy"
        )
        return _record(ledger, hyp, ev, Classification.policy_difference, setting, said)
    if values is not None and all(
        _is_value(x, values[0]) and _is_value(y, values[1]) for x, y in differ
    ):
        # the op is handed the setting itself: two values of a hyper-parameter the job
        # exposes, each used as given, not a value the setting should have left alone
        said = (
            f"{setting} is given to the arithmetic as it is: with tensor inputs equal, {where} "
            f"is handed the setting's own value ({differ[0][0]!r} in A, {differ[0][1]!r} in B); "
            "two choices of one hyper-parameter, a numerical policy"
        )
        return _record(ledger, hyp, ev, Classification.policy_difference, setting, said)
    if d.caller_b and d.caller_b.rpartition(":")[0] != d.caller.rpartition(":")[0]:
        # each run computes it from its own copy of the code (a library on another path,
        # another revision): which copy holds the defect is not for one run's source to say
        return unknown(
            f"the scalar given to {where} differs ({differ[0][0]!r} vs {differ[0][1]!r}), and "
            f"the runs make that call from different source files: A at "
            f"{_short(d.caller.rpartition(':')[0], case)}:{d.caller.rpartition(':')[2]}, B at "
            f"{_short(d.caller_b.rpartition(':')[0], case)}:{d.caller_b.rpartition(':')[2]}; "
            "the setting selects the code: compare the two"
        )
    file, _, line = d.caller.rpartition(":")
    through = object_call(file, int(line), op.base) if line.isdigit() else None
    if through is not None:
        # the op runs inside a method the job's line calls on one of its objects (an
        # optimizer's step): its scalars are that object's state, written wherever the job
        # writes it, not values of this line; the job's own function that made that value
        # from the same numbers is where the setting becomes it
        read = _read_values(
            case, ledger, hyp, ev, setting, where, differ, timeout_s, deadline, on_status
        )
        if read is not None:
            return read
        return unknown(
            f"the scalar given to {where} differs ({differ[0][0]!r} vs {differ[0][1]!r}) and "
            f"comes from the state of the object {_short(file, case)}:{line} calls ({through}), "
            "written elsewhere"
        )
    write, n = state_write_behind(file, int(line)) if line.isdigit() else (None, -1)
    site = f"{_short(file, case)}:{line}"
    if n > 1 or n < 0:
        behind = (
            f"depends on {n} writes of object state: which one is not read"
            if n > 1
            else "depends on object state this function does not write (or its source is unread)"
        )
        read = _read_values(
            case, ledger, hyp, ev, setting, where, differ, timeout_s, deadline, on_status
        )
        if read is not None:
            return read
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


def _precision_name(scalar: Any) -> bool:
    """Whether a dumped scalar names a floating-point precision (``torch.bfloat16``)."""
    return isinstance(scalar, str) and scalar.lower().removeprefix("torch.") in PRECISIONS


def _read_values(
    case: Case,
    ledger: Ledger,
    hyp: Hypothesis,
    ev: Evidence,
    setting: str,
    where: str,
    differ: list[tuple[Any, Any]],
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None],
) -> SettingReading | None:
    """The op's other scalar read through the job's own functions' small values
    (:mod:`.value_origin`): a function that makes another number from the same numbers,
    only a choice differing among its inputs, is where the setting becomes that value."""
    if time.monotonic() >= deadline or not same_program(case):
        return None
    origin = value_origin(case, ledger, timeout_s=timeout_s, on_status=on_status)
    if origin is None:
        return None
    text = (
        f"{setting} exposes a defect: with tensor inputs equal, {where} is given other scalars "
        f"({differ[0][0]!r} vs {differ[0][1]!r}) from an object's state; "
        f"{origin_said(origin, case.run_b.cwd)}: a value that should not depend on the setting"
    )
    loc = f"{origin.site()} ({origin.function})"
    return _record(ledger, hyp, ev, Classification.bug, loc, text)


def _is_value(scalar: Any, declared: Any) -> bool:
    """Whether a dumped scalar is a declared setting's value (its text parsed as a number
    when it is one; a flag's value is text in the argv)."""
    try:
        return float(scalar) == float(declared)
    except (TypeError, ValueError):
        return str(scalar) == str(declared)


def _read_uncontrolled_order(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    hyp: Hypothesis,
    setting: str,
    d: FirstDivergence,
    how: str,
    trace_ev: Evidence,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None],
    unknown: Callable[[str], None],
) -> SettingReading | None:
    """The same arithmetic in another order, under a setting no one chooses (the hash seed):
    not a policy, an order the job's code took from it. Where: the job's line that runs the
    first reordered op, from a dump of that op in both runs (a dumped op names its caller)."""
    if time.monotonic() >= deadline:
        return unknown("budget reached before finding the line that runs the reordered op")
    site = d.caller
    ev: Evidence | None = None
    if site is None:
        ws = Path(ledger.workspace)
        ctx = new_context(
            case, ledger, rep, timeout_s=timeout_s, deadline=deadline, on_status=on_status
        )
        cfg = CaptureConfig(
            out_dir=ws / "unused", steps=(d.step, d.step), level="op", dump=[d.name]
        )
        res, ev = trace_and_compare(ctx, cfg, "reordered op call site")
        if res is None:
            return unknown(f"the trace naming the line of {d.name} failed ({ev.id})")
        ledger.add_evidence(ev)
        dirs = ev.data_as(TraceCompareData).trace_dirs
        site = _caller_of(dirs["a"], d) or _caller_of(dirs["b"], d)
    if site is None:
        return unknown(f"{how}, and no line of the job's runs {d.name}")
    file, _, line = site.rpartition(":")
    loc = f"{_short(file, case)}:{line}"
    said = (
        f"{how}: the order follows {setting.partition(':')[2]}, an input no launch controls, so "
        f"it is taken from the iteration order of a hash-ordered container in the job's code "
        f"around {loc}, where the reordered op runs: a defect (sort what is iterated, or pin "
        "the order), not a numerical policy"
    )
    return _record(ledger, hyp, ev or trace_ev, Classification.bug, loc, said)


def _caller_of(trace_dir: str, d: FirstDivergence) -> str | None:
    e = _event_at(trace_dir, d, "caller")
    return e.caller if e is not None else None


def _region_text(r: CompiledRegion) -> str:
    eager, compiled = (r.ops_a, r.ops_b) if r.compiled_in == "b" else (r.ops_b, r.ops_a)
    # selection by index or order copies values: it cannot be where bits change
    copying = SELECTING_OPS - RANDOM_OPS - ATOMIC_OPS
    selecting = sorted({n for n in eager if _op_base(n) in copying})
    io = ""
    if r.inputs_equal is not None:
        io = (
            f"; its inputs {'equal' if r.inputs_equal else 'differ'}, its outputs "
            f"{'equal' if r.outputs_equal else 'differ'}"
        )
    sel = (
        f", selection ops among them ({', '.join(selecting[:4])}) copy values and cannot change bits"
        if selecting
        else ""
    )
    return (
        f"{r.scope or '<root>'} ({r.module}) compiled in run {r.compiled_in}: the other run "
        f"executes its {len(eager)} ops one by one{sel}, the compiled run shows "
        f"{len(compiled)} dispatched ops there, its generated kernels unseen{io}"
    )


def _op_base(name: str) -> str:
    op = parse_op(name)
    return op.base if op is not None else name


def _read_compiled(
    ledger: Ledger,
    hyp: Hypothesis,
    trace_ev: Evidence,
    setting: str,
    d: FirstDivergence,
    ulps: float,
    unknown: Callable[[str], None],
) -> SettingReading | None:
    """The first divergence is a module call one run compiles: the region, not an op inside
    it, is what differs. A policy when nothing in it draws random numbers (a compiled
    kernel draws from its own generator), every op outside the regions where the sequences
    differ is arithmetic, and the metric is within rounding: the same arithmetic fused and
    rounded otherwise."""
    at = f"rank {d.rank} step {d.step}"
    regions = "; ".join(_region_text(r) for r in d.regions)
    drawn = sorted(
        {n for r in d.regions for n in (*r.ops_a, *r.ops_b) if _op_base(n) in RANDOM_OPS}
    )
    if drawn:
        return unknown(f"at {at} the compiled region {regions} draws random numbers {drawn[:3]}")
    odd = sorted({n for n in d.parted if not is_arithmetic(n)})
    if odd:
        return unknown(
            f"at {at} the compiled region {regions}; outside it the op sequences differ with "
            f"non-arithmetic ops {odd[:5]}"
        )
    bound, narrow = rounding_bound(d.parted_dtypes)
    if ulps > bound:
        return unknown(
            f"at {at} the compiled region {regions}; the first differing metric is {ulps:g} "
            f"ulp apart: beyond rounding of {narrow}"
        )
    outside = (
        f"outside it the op sequences differ in arithmetic ops alone ({', '.join(sorted(set(d.parted))[:5])})"
        if d.parted
        else "every op outside it agrees in sequence"
    )
    said = (
        f"{setting} compiles a region the other run executes eagerly: at {at}, {regions}; "
        f"{outside}; the first differing metric is {ulps:g} ulp apart (rounding): the same "
        "arithmetic fused and rounded otherwise by the compiler, a numerical policy"
    )
    return _record(ledger, hyp, trace_ev, Classification.policy_difference, setting, said)


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
