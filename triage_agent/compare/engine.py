"""``compare_runs``: two runs in, one ``CompareResult`` out. Pure: no printing, no torch.

Preconditions are checked first and raise typed errors (no common rank); what can still be
compared when a run is incomplete (a torn last line, a rank missing from one run, different
world sizes) is compared, and the result says what was not (``complete`` and ``warnings``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .align import align
from .classify import demote_to_receiver, judge_pair, ref, state_write, widen_for
from .errors import IncompatibleRunsError
from .mapping import Mapping, apply_mapping, decoded, load_mapping
from .model import Ev, RankStream, TraceRun
from .producers import find_producers
from .result import (
    Candidate,
    Collectives,
    CompareResult,
    CrossRank,
    Divergence,
    EventRef,
    RankResult,
    RunInfo,
    Unmatched,
)

# Candidates kept per rank; state writers are kept first, the count says how many there were.
MAX_CANDIDATES = 100


def _info(run: TraceRun) -> RunInfo:
    return RunInfo(
        path=str(run.path),
        fmt=run.fmt,
        run_id=run.run_id,
        world_size=run.world_size,
        ranks=sorted(run.ranks),
    )


def _first_step(s: RankStream) -> int:
    return s.event(0).step if len(s) else 0


def _inner_diverged(e: Ev, seen: set[tuple[int, str | None, str]]) -> bool:
    """Did an event inside module ``e`` (its own ops, its submodules) diverge before it?

    A module's event is recorded when it returns, after everything it ran; if something
    inside it already differed, its output differs for that reason, whatever its inputs.
    """
    prefix = f"{e.scope}." if e.scope else ""
    return any(
        st == e.step and ph == e.phase and (sc == e.scope or sc.startswith(prefix))
        for st, ph, sc in seen
    )


def _candidate(
    kind: str, order: float, e: Ev, rank: int, a: EventRef | None, b: EventRef | None
) -> Candidate:
    writes = state_write(e)
    return Candidate(
        kind=kind,  # type: ignore[arg-type]
        run="both" if a and b else "a" if a else "b",
        rank=rank,
        step=e.step,
        event=f"{e.scope or '<root>'}::{e.name}",
        event_kind=e.kind,
        phase=e.phase,
        call_site=e.caller,
        writes_state=bool(writes),
        state_write=writes,
        order=order,
        a=a,
        b=b,
    )


def _capped(cands: list[Candidate]) -> list[Candidate]:
    if len(cands) <= MAX_CANDIDATES:
        return cands
    writers = [c for c in cands if c.writes_state][:MAX_CANDIDATES]
    rest = [c for c in cands if not c.writes_state][: MAX_CANDIDATES - len(writers)]
    return sorted(writers + rest, key=lambda c: c.order)


def _with_producers(
    d: Divergence, ea: Ev, eb: Ev, sa: RankStream, sb: RankStream, rank: int
) -> Divergence:
    links = find_producers(sa, ea, d.differing_inputs, "a", rank, sa.source)
    links += find_producers(sb, eb, d.differing_inputs, "b", rank, sb.source)
    return d.model_copy(update={"producers": links})


@dataclass(frozen=True)
class RunsContext:
    """What one rank's comparison needs to know about the two runs besides its own streams:
    small and picklable, so that a worker comparing one rank never holds the whole runs."""

    records_inputs: bool  # both formats record input digests (else origins are undecidable)
    world_size: int | None  # run A's
    traced_ranks: int  # ranks traced by the run that traced fewer

    @classmethod
    def of(cls, a: TraceRun, b: TraceRun) -> RunsContext:
        return cls(
            a.records_inputs and b.records_inputs, a.world_size, min(len(a.ranks), len(b.ranks))
        )


def compare_rank(
    sa: RankStream,
    sb: RankStream,
    ctx: RunsContext,
    mapping: Mapping | None = None,
) -> RankResult:
    rank = sa.rank
    if mapping is not None and mapping.rule:
        sa, sb = apply_mapping(sa, mapping), decoded(sb)
    al = align(sa, sb)
    records_inputs = ctx.records_inputs
    a_cut = sa.truncated_at is not None or not sa.clean_end
    b_cut = sb.truncated_at is not None or not sb.clean_end
    # Cheap pass: which pairs differ at all. Divergence records are only built for the
    # events the walk below stops at (building one per receiver would dominate the cost).
    items: list[tuple[float, tuple | Unmatched, Ev | None]] = []
    differing = 0
    for ea, eb in al.pairs:
        if (
            ea.inputs != eb.inputs
            or ea.outputs != eb.outputs
            or (ea.inputs_after is not None and ea.inputs_after != eb.inputs_after)
        ):
            differing += 1
            items.append((ea.index, (ea, eb), None))
    unmatched: list[Unmatched] = []
    for e, pos in al.only_a:
        reason = "after-truncation" if b_cut and pos >= len(sb) else "missing"
        u = Unmatched(event=ref(e, "a", rank, sa.source), other_index=pos, reason=reason)
        unmatched.append(u)
        items.append((e.index, u, e))
    for e, pos in al.only_b:
        reason = "after-truncation" if a_cut and pos >= len(sa) else "extra"
        u = Unmatched(event=ref(e, "b", rank, sb.source), other_index=pos, reason=reason)
        unmatched.append(u)
        items.append((pos - 0.5, u, e))
    items.sort(key=lambda t: t[0])
    first: Divergence | None = None
    origin: Divergence | None = None
    first_receiver: Divergence | None = None
    # how far into each stream the first divergence and the origin lie (events before them)
    first_at: dict[str, int] = {}
    origin_at: dict[str, int] = {}
    artifacts: list[Divergence] = []
    cands: list[Candidate] = []
    seen: set[tuple[int, str | None, str]] = set()  # (step, phase, scope) of divergences
    for order, it, lone in items:
        if isinstance(it, Unmatched):
            if it.reason == "after-truncation":
                continue
            # An event one run executes and the other does not is a candidate in its own
            # right, in execution order with the origin; the walk goes on to find that.
            a_ref = it.event if it.event.run == "a" else None
            b_ref = it.event if it.event.run == "b" else None
            kind = "missing" if a_ref else "extra"
            assert lone is not None
            cands.append(_candidate(kind, order, lone, rank, a_ref, b_ref))
            if first is None:
                side, other = ("a", "b") if a_ref else ("b", "a")
                first_at = {side: lone.index + 1, other: it.other_index}
            first = first or Divergence(role=kind, a=a_ref, b=b_ref)  # type: ignore[arg-type]
            continue
        jd = judge_pair(it[0], it[1], rank, sa.source, sb.source, records_inputs)
        if jd is None:
            continue
        if any(lb.code == "probe-artifact" for lb in jd.labels):
            artifacts.append(jd)
            continue
        ea = it[0]
        if jd.role == "origin" and ea.kind == "module" and _inner_diverged(ea, seen):
            jd = demote_to_receiver(jd)
        seen.add((ea.step, ea.phase, ea.scope))
        # the upstream walk starts at the first receiver that passes a difference on (one
        # whose different inputs gave equal outputs, an empty buffer's noise say, does not)
        passes_on = jd.differing_inputs and jd.differing_outputs
        if jd.role == "receiver" and passes_on and first_receiver is None:
            jd = first_receiver = _with_producers(jd, ea, it[1], sa, sb, rank)
        at = {"a": ea.index + 1, "b": it[1].index + 1}
        first_at = first_at or at
        first = first or jd
        if jd.role == "origin":
            origin, origin_at = jd, at
            cands.append(_candidate("origin", order, ea, rank, jd.a, jd.b))
            break
    notes: list[str] = []
    if al.reordered:
        notes.append(f"{al.reordered} paired events execute in a different order in B")
    if artifacts:
        notes.append(f"{len(artifacts)} probe artifact(s) set aside before the first divergence")
    if a_cut or b_cut:
        which = " and ".join(x for x, c in (("A", a_cut), ("B", b_cut)) if c)
        notes.append(f"run {which} ended early on this rank; compared up to its last event")
    widen = None
    if first is not None and origin is None and first.role == "receiver":
        widen = widen_for(first, sa.header, _first_step(sa), ctx.world_size, ctx.traced_ranks)
    diverged = first is not None
    unmatched.sort(key=lambda u: u.event.index if u.event.run == "a" else u.other_index)
    return RankResult(
        rank=rank,
        status="diverged" if diverged else "incomplete" if a_cut or b_cut else "identical",
        events_a=len(sa),
        events_b=len(sb),
        matched=al.matched,
        differing=differing,
        alignment=al.method,  # type: ignore[arg-type]
        first_divergence=first,
        origin=origin,
        candidates=_capped(cands[:-1]) + cands[-1:] if origin else _capped(cands),
        candidates_total=len(cands),
        first_receiver=first_receiver,
        artifacts=artifacts,
        outside_scope=widen,
        unmatched=unmatched,
        unmatched_total=len(unmatched),
        notes=notes,
        collectives=Collectives(
            recorded={
                side: _collectives(s, len(s))
                for side, s, cut in (("a", sa, a_cut), ("b", sb, b_cut))
                if cut
            },
            through_first={k: _collectives(sa if k == "a" else sb, n) for k, n in first_at.items()},
            through_origin={
                k: _collectives(sa if k == "a" else sb, n) for k, n in origin_at.items()
            },
        ),
    )


def _collectives(s: RankStream, hi: int) -> int:
    """Collectives among the first ``hi`` events of ``s``."""
    hi = min(hi, len(s))
    return sum(1 for i in s.may_contain("collective", 0, hi) if s.event(i).kind == "collective")


def stop_at_dead_peers(results: list[RankResult]) -> list[RankResult]:
    """Each rank compared only as far as every peer of the same run took part.

    When a rank of a run stops early (killed, hung and reaped), its peers' next collective
    has nobody on the other end: it fails, hangs or returns what the buffer held, and a
    rank ended inside it records that. Equal inputs and a different output then read as an
    origin on the rank that survived. So a divergence on a rank that lies past the
    collectives a stopped peer of that run recorded is not one: the rank is incomplete
    there (its origin alone past it: no origin). Collectives are counted per rank, not per
    process group: exact for one group; with several, a rank that runs more collectives than
    its stopped peer is stopped early (less compared), one that runs fewer can be late.
    """
    stopped = [
        (side, n, r.rank)
        for r in results
        if r.collectives is not None
        for side, n in r.collectives.recorded.items()
    ]
    out = []
    for r in results:
        c = r.collectives
        peers = [x for x in stopped if x[2] != r.rank]
        dead = (
            None
            if c is None or r.status != "diverged"
            else _past(c.through_origin, peers) or _past(c.through_first, peers)
        )
        if dead is None:
            out.append(r)
            continue
        side, n, peer = dead
        notes = [
            *r.notes,
            f"rank {peer} of run {side.upper()} stopped after {n} collective(s); this rank "
            "is compared up to its own collective past those",
        ]
        if _past(c.through_first, peers):
            update = {
                "status": "incomplete",
                "first_divergence": None,
                "first_receiver": None,
                "candidates": [],
                "candidates_total": 0,
                "outside_scope": None,
            }
        else:
            update = {"candidates": [x for x in r.candidates if x.kind != "origin"]}
        out.append(r.model_copy(update={**update, "origin": None, "notes": notes}))
    return out


def received_through_collectives(results: list[RankResult]) -> list[RankResult]:
    """A collective with equal inputs on this rank and different outputs is no origin when a
    peer rank had already diverged by the time it entered that collective: the peer's
    contribution carries the difference, and this rank receives it.

    A peer counts when its first divergence came no later, in collectives run, than this
    rank's origin (for one process group the collectives pair by their count). The rank's
    origin is dropped (no origin here: the one to find is on the peer) and a note says
    which peer it came from."""
    firsts = {
        r.rank: (r.collectives.through_first, bool(r.first_divergence.differing_inputs))
        for r in results
        if r.status == "diverged" and r.first_divergence is not None
    }
    out = []
    for r in results:
        o = r.origin
        if o is None or not any(lb.code == "collective" for lb in o.labels):
            out.append(r)
            continue
        at = r.collectives.through_origin
        # before this collective (fewer collectives run), or inside it with its own inputs
        # already different; a peer whose first divergence is this collective with equal
        # inputs entered it as this rank did
        peers = sorted(
            p
            for p, (first, ins_differ) in firsts.items()
            if p != r.rank
            and first
            and all(
                first.get(k, 0) < n or (first.get(k, 0) == n and ins_differ)
                for k, n in at.items()
                if k in first
            )
        )
        if not peers:
            out.append(r)
            continue
        note = (
            f"{o.a.name if o.a else 'the collective'} has equal inputs here and different "
            f"outputs, but rank(s) {peers} had already diverged when they entered it: this "
            "rank receives their difference through the collective (no origin here)"
        )
        out.append(
            r.model_copy(
                update={
                    "origin": None,
                    "candidates": [x for x in r.candidates if x.kind != "origin"],
                    "notes": [*r.notes, note],
                }
            )
        )
    return out


def _past(through: dict[str, int], stopped: list[tuple[str, int, int]]) -> tuple | None:
    """The stopped peer (run, collectives, rank) whose collectives ``through`` goes past."""
    return next(
        ((s, n, p) for s, n, p in sorted(stopped, key=lambda x: x[1]) if through.get(s, 0) > n),
        None,
    )


def _summary(results: list[RankResult]) -> CrossRank:
    s = CrossRank()
    steps: list[int] = []
    writers: list[str] = []
    for r in results:
        unmatched_first = bool(r.candidates) and r.candidates[0].kind != "origin"
        if unmatched_first:
            s.unmatched_first_ranks.append(r.rank)
            writers += [c.describe() for c in r.structural_candidates if c.writes_state][:1]
        if r.status in ("only-in-a", "only-in-b"):
            s.unpaired_ranks.append(r.rank)
        elif r.status == "identical":
            s.identical_ranks.append(r.rank)
        elif r.status == "incomplete":
            s.incomplete_ranks.append(r.rank)
        elif r.origin is not None:
            s.origin_ranks.append(r.rank)
        elif unmatched_first:
            pass  # its first candidate is an event only one run executes, not a receiver
        elif r.outside_scope is not None:
            s.receiver_only_ranks.append(r.rank)
            s.outside_scope_ranks.append(r.rank)
        else:
            s.receiver_only_ranks.append(r.rank)
        fd = r.first_divergence
        if fd is not None:
            e = fd.a or fd.b
            if e is not None:
                steps.append(e.step)
    s.earliest_step = min(steps) if steps else None
    coll = [
        r.rank
        for r in results
        if r.origin and any(lb.code == "collective" for lb in r.origin.labels)
    ]
    compute = [r for r in s.origin_ranks if r not in coll]
    if coll and compute:
        s.note = (
            f"ranks {coll} first diverge at a collective with equal local inputs; ranks "
            f"{compute} hold a compute origin: the collective ranks most likely receive it"
        )
    elif coll:
        s.note = (
            f"every origin ({coll}) is a collective with equal local inputs on all traced "
            "ranks: the reduction itself (algorithm or order) is the suspect"
        )
    if writers:
        lead = "; ".join(writers[:4])
        s.note = (s.note + "; " if s.note else "") + (
            f"before any origin, {lead}: a state write one run lacks changes what every "
            "later event reads, so it is a first-divergence candidate"
        )
    return s


def plan_ranks(
    a_ranks: Iterable[int], b_ranks: Iterable[int], ranks: list[int] | None
) -> tuple[list[int], set[int]]:
    """The ranks to report (``ranks``, default: every rank either run traced) and those
    both runs hold. Raises when a wanted rank is in neither run or none is in both."""
    sa, sb = set(a_ranks), set(b_ranks)
    common = sa & sb
    wanted = sorted(set(ranks)) if ranks is not None else sorted(sa | sb)
    for r in wanted:
        if r not in sa and r not in sb:
            raise InputError(f"rank {r} is in neither run (A has {sorted(sa)})")
    if not any(r in common for r in wanted):
        raise IncompatibleRunsError(f"no rank in common: A has {sorted(sa)}, B has {sorted(sb)}")
    return wanted, common


def world_size_warning(a: int | None, b: int | None) -> list[str]:
    if a and b and a != b:
        return [
            f"world sizes differ (A {a}, B {b}): ranks were paired by rank number; with "
            "different parallel layouts a pairing by coordinates may be what you want (use "
            "--rank, or a mapping)"
        ]
    return []


def unpaired_rank(rank: int, side: str, events: int) -> tuple[RankResult, str]:
    """The result of a rank only run ``side`` traced, and the warning that says so."""
    other = "B" if side == "a" else "A"
    res = RankResult(
        rank=rank,
        status=f"only-in-{side}",  # type: ignore[arg-type]
        events_a=events if side == "a" else 0,
        events_b=events if side == "b" else 0,
    )
    return res, f"rank {rank}: no trace file in run {other}; not compared"


def assemble(
    a: RunInfo, b: RunInfo, mapping: Mapping | None, results: list[RankResult], warnings: list[str]
) -> CompareResult:
    """One ``CompareResult`` from per-rank results in rank order, however they were computed.

    Any warning (a torn or missing rank, different world sizes) makes it incomplete."""
    results = received_through_collectives(stop_at_dead_peers(results))
    status = "diverged" if any(r.status == "diverged" for r in results) else "identical"
    return CompareResult(
        status=status,  # type: ignore[arg-type]
        complete=not warnings,
        a=a,
        b=b,
        mapping=mapping.source if mapping is not None else None,
        ranks=results,
        summary=_summary(results),
        warnings=warnings,
    )


def compare_runs(
    a: TraceRun,
    b: TraceRun,
    mapping: Mapping | str | Path | None = None,
    ranks: list[int] | None = None,
) -> CompareResult:
    """Align two runs rank by rank and report each rank's first divergence.

    ``mapping``: a correspondence map (or its path) rewriting A's scopes/names into B's.
    ``ranks``: compare only these ranks (default: every rank either run traced).
    """
    if isinstance(mapping, str | Path):
        mapping = load_mapping(mapping)
    warnings = [f"A: {w}" for w in a.warnings] + [f"B: {w}" for w in b.warnings]
    warnings += world_size_warning(a.world_size, b.world_size)
    wanted, common = plan_ranks(a.ranks, b.ranks, ranks)
    ctx = RunsContext.of(a, b)
    results: list[RankResult] = []
    for r in wanted:
        if r in common:
            results.append(compare_rank(a.ranks[r], b.ranks[r], ctx, mapping))
            continue
        side = "a" if r in a.ranks else "b"
        res, warning = unpaired_rank(r, side, len((a if side == "a" else b).ranks[r]))
        results.append(res)
        warnings.append(warning)
    return assemble(_info(a), _info(b), mapping, results, warnings)
