"""The workflow's moves: observe, test, read. A move is a record (what it is, what it costs,
how well its outcome separates what is open, which evidence proposed it) and one function
that makes it.

- observe: the bounded scan with its reproducers (stage 1), the state at the step boundaries
  of both runs, a trace of both runs around the first differing step (stage 2), a bisection
  of the source revisions;
- test: one arm, an uninstrumented rerun of A, of B or of both under one intervention (or
  several that launch only together), compared over every step and rank;
- read: what a proven setting means, from the trace of the two runs that differ in it alone.

Every mechanism the workflow has is one of these; which one is made next is the chooser's
decision (:mod:`.chooser`), from the moves the proposers (:mod:`.proposers`) offer.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..errors import TriageError
from ..evidence_data import TraceCompareData
from ..fingerprint import CaptureConfig
from ..ledger_rules import BY_LATEST_TEST
from ..records import EvidenceResult, Hypothesis, HypothesisStatus
from .arms import Arm, prior_rerun, try_arm
from .boundary_state import boundary_arms, order_arms, proven_setting
from .classify import CLASSIFICATION, FIX_POLICY
from .counterparts import counterpart_arms
from .declared import hypothesis_for
from .extra_writers import writer_arms
from .fixcheck import bisect_source_change, validate_fix
from .hunk_sites import place_within
from .prefetch import Prefetch
from .setting_effect import read_proven_setting
from .situation import Situation
from .stage1 import run_stage1
from .stated_flags import text_arms
from .structural import (
    carried_write_arms,
    extra_call_arms,
    first_receivers,
    is_draw,
    replica_arms,
)
from .tree_narrowing import (
    hunk_function_arms,
    narrow_file_change,
    narrow_tree_change,
    tree_pair,
)
from .uninitialised import empty_arms

Status = Callable[[str, str], None]
What = Literal[
    "scan",
    "state",
    "trace",
    "trace-draws",
    "trace-back",
    "bisect",
    "narrow",
    "narrow-files",
    "read-counterparts",
    "read-writes",
    "read-text",
    "arm",
    "origin-fix",
    "read-setting",
    "read-site",
    "correspond",
]


class Move(BaseModel):
    """One thing the workflow can do next, as the chooser weighs it."""

    key: str = Field(description="the move's identity: made once per workflow run")
    kind: Literal["observe", "test", "read"]
    what: What
    said: str = Field(description="the move in one line")
    cost_s: float = Field(ge=0, description="expected seconds, mostly launches")
    gain: float = Field(
        gt=0,
        le=1,
        description="how well its outcome separates the open hypotheses: near 1 when an "
        "observation points at exactly this test, low for a test no observation asks for",
    )
    guided: bool = Field(
        description="an observation or a refutation points at it; an unguided test waits "
        "until every observation that could point elsewhere is made"
    )
    why: str = Field(description="the evidence behind it, in words")
    evidence: list[str] = Field(default_factory=list, description="ledger evidence ids behind it")
    arm: Arm | None = None
    hypothesis: str | None = Field(default=None, description="the hypothesis it decides")
    reading: bool = Field(
        default=False,
        description="made to read a proven hypothesis further (a trace a reading needs): it "
        "goes on after a proof, like the reading itself",
    )
    beside: Literal["state"] | None = Field(
        default=None,
        description="an observation made at the same time (the scan runs while the state "
        "relaunches run: neither depends on the other, and a launch is mostly waiting)",
    )

    @property
    def value(self) -> float:
        """Separation per second: what the chooser ranks by."""
        return self.gain / max(self.cost_s, 1.0)


def arm_move(
    arm: Arm, *, gain: float, guided: bool, why: str, cost_s: float, evidence: list[str] = ()
) -> Move:
    on = "both runs" if arm.run == "both" else f"run {arm.run.upper()}"
    ivs = " + ".join((arm.intervention, *arm.also))
    return Move(
        key=f"arm|{arm.hypothesis.id}|{arm.run}|{ivs}",
        kind="test",
        what="arm",
        said=f"rerun {on} uninstrumented with {ivs}",
        cost_s=cost_s * (2 if arm.run == "both" else 1),
        gain=gain,
        guided=guided,
        why=why,
        evidence=list(evidence),
        arm=arm,
        hypothesis=arm.hypothesis.id,
    )


# -- making them -------------------------------------------------------------------------------
def make(move: Move, sit: Situation, status: Status) -> None:
    """Make one move; what it learns lands in the ledger and in the situation."""
    sit.done.add(move.key)
    {
        "scan": _scan,
        "state": _state,
        "trace": _trace,
        "trace-draws": _trace_draws,
        "trace-back": _trace_back,
        "bisect": _bisect,
        "narrow": _narrow,
        "narrow-files": _narrow_files,
        "read-counterparts": _read_counterparts,
        "read-writes": _read_writes,
        "read-text": _read_text,
        "arm": _arm,
        "origin-fix": _origin_fix,
        "read-setting": _read_setting,
        "read-site": _read_site,
        "correspond": _correspond,
    }[move.what](move, sit, status)


def _stage1(sit: Situation, status: Status) -> list[Hypothesis]:
    status("stage 1", "bounded static scan")
    run_stage1(
        sit.case,
        sit.ledger,
        sit.rep,
        max_hypotheses=sit.opts.max_hypotheses,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("stage 1", m),
    )
    return sit.supported()


def _scan(move: Move, sit: Situation, status: Status) -> None:
    if move.beside == "state":
        _observe_state(sit, status, meanwhile=lambda: _stage1(sit, status))
        return
    _stage1(sit, status)


def _state(move: Move, sit: Situation, status: Status) -> None:
    meanwhile = (lambda: _stage1(sit, status)) if not sit.scanned() else None
    _observe_state(sit, status, meanwhile=meanwhile)


def _observe_state(sit: Situation, status: Status, meanwhile=None) -> None:
    sit.done.update({"state", "scan"} if meanwhile is not None else {"state"})
    arms = boundary_arms(
        sit.case,
        sit.ledger,
        sit.rep,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("state", m),
        supported=sit.supported(),
        meanwhile=meanwhile,
    )
    sit.state_arms = arms
    for a in arms:
        sit.where[a.hypothesis.id] = a.location


def _trace(move: Move, sit: Situation, status: Status) -> None:
    from .stage2 import run_stage2

    sit.traced = True
    supported = sit.supported()
    prefetch = Prefetch()
    if sit.ma is not None:  # the fix check's rerun does not depend on the trace: overlap them
        prefetch.fix_reruns(sit.case, Path(sit.ledger.workspace), supported, sit.opts.timeout_s)
    step = sit.rep.step or 0
    status("stage 2", f"tracing steps {max(step - 1, 0)}-{step}")
    sit.trace = prefetch.alongside(  # Ctrl-C in stage 2 ends the fix check's rerun too
        run_stage2,
        sit.case,
        sit.ledger,
        sit.rep,
        supported,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("stage 2", m),
        executor=sit.opts.executor,
    )
    prefetch.wait()
    if sit.trace is not None:
        found, said = extra_call_arms(sit.case, sit.trace.extra_calls)
        for line in said[:5]:
            sit.ledger.note(f"extra call not testable: {line}")
        carried, seen = carried_write_arms(sit.case, sit.trace.receivers)
        for line in seen:
            sit.ledger.note(f"first receiver: {line}")
        replicas = traced_replica_arms(sit)
        origin = sit.trace.origin
        # a run against its repeat: nothing declared differs, and memory the job never
        # wrote is one input no launch controls
        unwritten = (
            empty_arms(sit.case, f"{origin.scope}::{origin.name}", origin.caller)
            if origin is not None and not sit.declared
            else []
        )
        sit.trace_arms = []
        _add_trace_arms(sit, replicas + carried + found + unwritten)


def _add_trace_arms(sit: Situation, arms: list[Arm]) -> None:
    """Add what a trace proposes, once each, less what lies in code two source trees share."""
    kept, shared = outside_the_change(sit.case, arms)
    sit.held_arms += shared
    for a in shared:
        sit.ledger.note(
            f"not tested while the runs' source trees differ: {a.intervention} "
            f"({a.location}) lies in code both runs share, so it can show how the change "
            "reaches training but not which change it is; the trees are narrowed instead"
        )
    known = {(a.run, a.intervention) for a in sit.trace_arms}
    for a in kept:
        if (a.run, a.intervention) not in known:
            known.add((a.run, a.intervention))
            sit.trace_arms.append(a)
            sit.where.setdefault(a.hypothesis.id, a.location)


def outside_the_change(case, arms: list[Arm]) -> tuple[list[Arm], list[Arm]]:
    """(arms to test, arms held): when the runs take their code from two source trees (a
    library's version N against N+1 on a path variable), an arm placed in a file outside
    both trees is in code both runs run alike; proving it would name where the change
    shows, not the change. Those wait for the trees to be narrowed to their hunks."""
    keys = set(case.run_a.env) | set(case.run_b.env)
    trees = [t for k in sorted(keys) if (t := tree_pair(case, k)) is not None]
    if not trees:
        return arms, []
    roots = [d.resolve() for da, db, _ in trees for d in (da, db)]
    kept, held = [], []
    for a in arms:
        file = a.location.split(" ", 1)[0].rpartition(":")[0]
        spec = case.run_b if a.run == "b" else case.run_a
        path = Path(file) if Path(file).is_absolute() else Path(spec.cwd or ".") / file
        inside = any(path.resolve().is_relative_to(r) for r in roots)
        (kept if inside or not file or not path.is_file() else held).append(a)
    return kept, held


def traced_replica_arms(sit: Situation) -> list:
    """sync-grads arms for parameters whose copies part across one traced run's ranks."""
    if sit.trace is None:
        return []
    try:
        dirs = sit.trace.evidence.data_as(TraceCompareData).trace_dirs
    except TypeError:
        return []
    if not (dirs.get("a") and dirs.get("b")):
        return []  # no usable trace (each capture level failed or perturbed the run)
    try:
        return replica_arms(sit.case, dirs, sit.ledger.workspace)
    except (TriageError, OSError) as exc:
        sit.ledger.note(f"the traced ranks' parameter copies are not read: {exc}", level="warning")
        return []


def moved_generator(sit: Situation) -> bool:
    """The trace's origin is a draw whose generator state differs between the runs: it
    received its difference through the generator, from whatever moved it before."""
    t = sit.trace
    if t is None or t.origin is None or not is_draw(t.origin.name):
        return False
    try:
        states = t.evidence.data_as(TraceCompareData).rng_state
    except TypeError:
        return False
    return isinstance(states, dict) and states.get("a") != states.get("b")


def _trace_ops(sit: Situation, status: Status, steps: tuple[int, int], label: str):
    """Every op of both runs over ``steps``, compared: (the pass's context, the comparison
    or None when a traced launch failed, its evidence, not yet recorded)."""
    from .stage2 import new_context, trace_and_compare

    ctx = new_context(
        sit.case,
        sit.ledger,
        sit.rep,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("stage 2", m),
        executor=sit.opts.executor,
    )
    cfg = CaptureConfig(
        out_dir=Path(sit.ledger.workspace) / "unused", steps=steps, level="op", digest="both"
    )
    res, ev = trace_and_compare(ctx, cfg, label)
    return ctx, res, ev


def draw_window(sit: Situation) -> tuple[int, int]:
    """The steps a search for who moved a generator traces: the draw's step and the one
    before it. A draw made during initialisation (step -1) is searched over the first step,
    whose trace holds initialisation's events too."""
    assert sit.trace is not None and sit.trace.origin is not None
    first = sit.rep.diff.common_steps[0] if sit.rep.diff.common_steps else 0
    step = max(sit.trace.origin.step, first)
    return max(step - 1, first), step


def _trace_draws(move: Move, sit: Situation, status: Status) -> None:
    """Who moved the generator: every op of the step before the draw and of the draw's own,
    so a draw (or a seeding) only one run makes between the last equal boundary and the
    origin is an event one run executes, with its call site."""
    lo, step = draw_window(sit)
    ctx, res, ev = _trace_ops(sit, status, (lo, step), "who moved the generator")
    if res is None:
        return
    ctx.saw(res)
    draws = [c for c in ctx.extra_calls if is_draw(c.event)]
    ev.summary += f"; {len(draws)} draw(s) only one run makes in steps {lo}-{step}" + (
        f", first {draws[0].describe()}" if draws else ""
    )
    sit.ledger.add_evidence(ev)
    found, said = extra_call_arms(sit.case, draws + [c for c in ctx.extra_calls if c not in draws])
    for line in said[:3]:
        sit.ledger.note(f"extra call not testable: {line}")
    if not draws:
        # the same draws in both runs, from another seed: a seeding the set-ups order apart
        found += order_arms(sit.case, sit.ledger, sit.trace.origin.caller)
    _add_trace_arms(sit, found)


BACK_STEPS = 16  # how far back a producer is searched: a trace of every op of each step


def back_from(sit: Situation) -> int:
    """The first step a producer search traces: the runs' first step, at most BACK_STEPS
    before the window's last."""
    first = sit.rep.diff.common_steps[0] if sit.rep.diff.common_steps else 0
    assert sit.trace is not None
    return max(first, sit.trace.window[1] - BACK_STEPS)


def _trace_back(move: Move, sit: Situation, status: Status) -> None:
    """Where a value the first receiver reads was written: every op of both runs from an
    earlier step to the receiver's, so the producer search reaches back across steps. A value
    one run wrote in place at an earlier step and reads again is tested by running that
    line's in-place calls out of place."""
    assert sit.trace is not None
    lo, step = back_from(sit), sit.trace.window[1]
    _, res, ev = _trace_ops(sit, status, (lo, step), "producer search")
    if res is None:
        return
    found, said = carried_write_arms(sit.case, first_receivers(res))
    ev.summary += "; " + (
        "; ".join(said)
        if said
        else f"no event of steps {lo}-{step} wrote the first receiver's unproduced inputs"
    )
    sit.ledger.add_evidence(ev)
    _add_trace_arms(sit, found)


def _arm(move: Move, sit: Situation, status: Status) -> None:
    assert move.arm is not None
    arm = move.arm
    sit.where.setdefault(arm.hypothesis.id, arm.location)
    settings = [h for h in sit.proven() if h.id != arm.hypothesis.id]
    ev = try_arm(
        sit.case,
        sit.ledger,
        arm,
        timeout_s=sit.opts.timeout_s,
        on_status=lambda m: status("intervene", m),
    )
    sit.where[arm.hypothesis.id] = arm.location  # a rerun may have placed it more exactly
    if move.reading and ev is not None and ev.result == EvidenceResult.supported:
        # the setting (or a proven change) stays as B has it and this change alone makes
        # every step match: it reaches training through the place this rerun found
        for h in settings:
            sit.ledger.update_hypothesis(
                h.id,
                statement=f"{h.statement}; it reaches training through "
                f"{arm.hypothesis.statement} (at {arm.location})",
            )


def _origin_fix(move: Move, sit: Situation, status: Status) -> None:
    """The trace origin is only a hypothesis until an intervention moves the bits."""
    hyp = sit.state().hypotheses[move.hypothesis or ""]
    policy = FIX_POLICY[str(hyp.category)]
    ev = prior_rerun(sit.ledger, hyp.id) or validate_fix(
        sit.case,
        sit.ledger,
        policy,
        [hyp.id],
        str(sit.ma),
        timeout_s=sit.opts.timeout_s,
        on_status=lambda m: status("fix", m),
    )
    if ev.result == EvidenceResult.supported and hyp.status != HypothesisStatus.supported:
        sit.ledger.update_hypothesis(
            hyp.id, status=HypothesisStatus.supported, evidence=[ev.id], reason=BY_LATEST_TEST
        )


def _read_setting(move: Move, sit: Situation, status: Status) -> None:
    hid = move.hypothesis or ""
    sit.read.add(hid)
    assert sit.trace is not None
    read = read_proven_setting(
        sit.case,
        sit.ledger,
        sit.rep,
        sit.state().hypotheses[hid],
        sit.where.get(hid, ""),
        sit.trace.evidence,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("setting", m),
        values=next(((d.a, d.b) for d in sit.declared if hypothesis_for(d).id == hid), None),
    )
    if read is not None:
        sit.where[hid] = read.location


def _read_site(move: Move, sit: Situation, status: Status) -> None:
    """Run a site's reproducer again at run A's value of a proven setting. The site behaving
    there (and misbehaving at B's value, as it did) says the setting reaches training through
    it; the site's own fix is then run on the job, and the proven settings say where they act."""
    from reproducers.generator import generate
    from reproducers.launcher import launch
    from reproducers.params import TEMPLATES, setting_knobs

    _, hid, pid = move.key.split("|")
    st = sit.state()
    hyp = st.hypotheses[hid]
    setting = proven_setting(sit.where.get(pid, ""))
    assert hyp.reproducer is not None and setting is not None
    name, a_value, _ = setting
    knobs = setting_knobs(TEMPLATES[hyp.reproducer.template].params_model)
    knob = next(k for k, v in knobs.items() if v == name)
    value = {"true": True, "false": False}.get(a_value.lower(), a_value)
    spec = hyp.reproducer.model_copy(update={"params": {**hyp.reproducer.params, knob: value}})
    finding = st.findings[hyp.findings[0]].model_copy(update={"reproducer": spec})
    status("setting", f"{hyp.id}'s reproducer at {knob}={a_value}")
    ws = Path(sit.ledger.workspace)
    try:
        gen = generate(finding, ws, case=sit.case, ledger=sit.ledger)
        ran = launch(gen, ws, timeout_s=sit.opts.timeout_s, hypotheses=[hid], record=False)
    except TriageError as exc:
        sit.ledger.note(f"{hid}'s reproducer could not run at {knob}={a_value}: {exc}")
        return
    if ran.result not in (EvidenceResult.supported, EvidenceResult.refuted):
        sit.ledger.note(f"{hid}'s reproducer at {knob}={a_value} decided nothing: {ran.summary}")
        return
    behaves = ran.result == EvidenceResult.refuted
    said = (
        f"{name} reaches training through {hyp.statement}: the site misbehaves at B's value "
        f"and behaves at A's ({a_value})"
        if behaves
        else f"{hyp.statement} misbehaves at A's {name} ({a_value}) as well: the setting does "
        "not act through it"
    )
    ev = sit.ledger.add_evidence(
        ran.model_copy(
            update={
                "hypotheses": [hid, pid],
                "result": EvidenceResult.supported if behaves else EvidenceResult.refuted,
                "summary": f"{said} ({knob}={a_value}: {ran.summary})",
            }
        )
    )
    if not behaves:
        sit.ledger.update_hypothesis(hid, status=HypothesisStatus.inconclusive, evidence=[ev.id])
        return
    for other in sit.proven():
        if other.id == pid or (sit.where.get(other.id) or "").startswith(("config:", "env:")):
            sit.ledger.update_hypothesis(
                other.id,
                statement=f"{other.statement}; it reaches training through {hyp.statement}",
            )
    policy = FIX_POLICY.get(str(hyp.category))
    if policy is None:
        return
    fix = prior_rerun(sit.ledger, hid) or validate_fix(
        sit.case,
        sit.ledger,
        policy,
        [hid],
        str(sit.ma),
        timeout_s=sit.opts.timeout_s,
        on_status=lambda m: status("fix", m),
    )
    sit.ledger.update_hypothesis(
        hid,
        status=HypothesisStatus.supported
        if fix.result == EvidenceResult.supported
        else HypothesisStatus.inconclusive,
        evidence=[ev.id, fix.id],
        reason=BY_LATEST_TEST,
    )


def _correspond(move: Move, sit: Situation, status: Status) -> None:
    """Compare the two frameworks' corresponding boundaries (outputs, consumed gradients,
    master weights, moments, counters) the baselines captured, and turn the first differing
    boundary's diagnosis into arms: each intervention on B's own configuration surface that
    its diagnosis asks for (docs/megatron.md), tested like any arm, over every step."""
    from ..correspond.boundaries import build_table
    from ..correspond.candidates import candidates
    from ..correspond.mapping import load_side
    from ..records import Evidence, EvidenceKind

    sit.corresponded = True
    assert sit.boundaries is not None
    a_dir, b_dir = sit.boundaries
    status("correspond", "corresponding boundaries of both runs")
    try:
        table, _ = build_table(a_dir, b_dir)
    except TriageError as exc:
        sit.ledger.note(f"corresponding boundaries not compared: {exc}", level="warning")
        return
    first, policy = table.first, table.policy
    if first is None:
        summary = "corresponding boundaries: every boundary of every step matches"
    else:
        summary = (
            f"corresponding boundaries: first differing step {first.step} boundary "
            f"{first.boundary}; {policy.name + ': ' + policy.detail if policy else 'no policy named'}"
        )
    arms: list[Arm] = []
    if first is not None and policy is not None:
        for c in candidates(
            policy, first.boundary, first.step, load_side(a_dir), load_side(b_dir), sit.case.run_b
        ):
            where = _correspond_location(c.intervention)
            hid = "H-" + hashlib.sha256(f"correspond|{c.intervention}".encode()).hexdigest()[:10]
            arms.append(
                Arm(
                    run="b",
                    intervention=c.intervention,
                    kind="config-policy",
                    location=where,
                    hypothesis=Hypothesis(
                        id=hid,
                        statement=f"step {first.step} boundary {first.boundary} differs by a "
                        f"policy of B's ({policy.name}): {c.intervention} ({c.governs}) "
                        "gives B A's",
                        category="config-policy",
                        rationale=c.why,
                        classification=CLASSIFICATION["config-policy"],
                    ),
                )
            )
            if c.relevant:
                sit.correspond_relevant.add(hid)
    sit.correspond_arms = arms
    sit.ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.manifest,
            result=EvidenceResult.observed,
            summary=summary + (f"; {len(arms)} interventions on B to test" if arms else ""),
            hypotheses=[a.hypothesis.id for a in arms if a.hypothesis.id in sit.state().hypotheses],
        )
    )


def _correspond_location(intervention: str) -> str:
    """Where an aligning intervention acts, as a verdict names it."""
    word, _, rest = intervention.partition(" ")
    if word == "config":
        return "config:" + rest.split("=", 1)[0]
    if word == "replace":
        return "call:" + rest.split("=", 1)[0]
    return intervention


def _bisect(move: Move, sit: Situation, status: Status) -> None:
    sit.bisected = True
    found = bisect_source_change(
        sit.case,
        sit.ledger,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("bisect", m),
    )
    if found is not None:
        sit.bisect_found = found.hypothesis
        sit.where[found.hypothesis.id] = found.location


def _narrow(move: Move, sit: Situation, status: Status) -> None:
    key = move.key.split("|", 1)[1]
    found = narrow_tree_change(
        sit.case,
        sit.ledger,
        key,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("bisect", m),
    )
    if found is None:
        return
    pair = tree_pair(sit.case, key)
    if pair is not None and time.monotonic() < sit.deadline:
        found = place_within(
            sit.case,
            sit.ledger,
            sit.rep,
            found,
            pair[2].rstrip("/\\"),
            sit.trace.evidence if sit.trace is not None else None,
            timeout_s=sit.opts.timeout_s,
            deadline=sit.deadline,
            on_status=lambda m: status("bisect", m),
        )
    sit.bisect_found = found.hypothesis
    sit.where[found.hypothesis.id] = found.location
    if move.hypothesis:
        setting = sit.state().hypotheses[move.hypothesis]
        sit.ledger.update_hypothesis(
            setting.id,
            statement=f"{setting.statement}; it reaches training through "
            f"{found.location.split(' (')[0]}",
        )
    # the hunks are where the change begins; when the trace saw a write in place in code
    # both trees share, a function the hunks rewrite that hands out the tensor written is
    # where the difference is made (a reading, the change kept)
    writes = ("outplace ", "keep-saved", "isolate-writes ")
    if not any(a.intervention.startswith(writes) for a in sit.held_arms):
        return
    for arm in hunk_function_arms(sit.case, key, found):
        m = arm_move(arm, gain=move.gain, guided=True, why=arm.hypothesis.statement, cost_s=0.0)
        _arm(m.model_copy(update={"reading": True}), sit, status)
        if sit.validated(arm.hypothesis.id) is not None:
            return


def _narrow_files(move: Move, sit: Situation, status: Status) -> None:
    pair = sit.selected_files()
    if pair is None:
        return
    found = narrow_file_change(
        sit.case,
        sit.ledger,
        *pair,
        selector=sit.where.get(move.hypothesis or "", "").removeprefix("config:").split(" ")[0],
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("bisect", m),
    )
    if found is None:
        return
    sit.bisect_found = found.hypothesis
    sit.where[found.hypothesis.id] = found.location
    if move.hypothesis:
        setting = sit.state().hypotheses[move.hypothesis]
        sit.ledger.update_hypothesis(
            setting.id,
            statement=f"{setting.statement}; it reaches training through "
            f"{found.location.split(' (')[0]}",
        )


def _read_counterparts(move: Move, sit: Situation, status: Status) -> None:
    """A proven setting read through the same-named functions each run alone calls: B with
    A's in place of its own, the setting kept (:mod:`.counterparts`)."""
    hyp = sit.state().hypotheses[move.hypothesis or ""]
    for arm in counterpart_arms(
        sit.case,
        sit.ledger,
        sit.rep,
        hyp,
        sit.trace.evidence if sit.trace is not None else None,
        timeout_s=sit.opts.timeout_s,
        deadline=sit.deadline,
        on_status=lambda m: status("setting", m),
    ):
        m = arm_move(arm, gain=move.gain, guided=True, why=arm.hypothesis.statement, cost_s=0.0)
        _arm(m.model_copy(update={"reading": True}), sit, status)
        if sit.validated(arm.hypothesis.id) is not None:
            return


def _read_text(move: Move, sit: Situation, status: Status) -> None:
    """A proven flag read through what the job's functions made of its texts: each that made
    a value the text does not state is tested by returning what the text states, the flag
    left as B has it (a reading, not a test of the flag)."""
    hyp = sit.state().hypotheses[move.hypothesis or ""]
    key = sit.where.get(hyp.id, "").removeprefix("config:").split(" ", 1)[0]
    arms = text_arms(
        sit.case,
        sit.ledger,
        hyp,
        key,
        timeout_s=sit.opts.timeout_s,
        on_status=lambda m: status("setting", m),
    )
    for arm in arms:
        m = arm_move(arm, gain=move.gain, guided=True, why=arm.hypothesis.statement, cost_s=0.0)
        _arm(m.model_copy(update={"reading": True}), sit, status)
        if sit.validated(arm.hypothesis.id) is not None:
            return


def _read_writes(move: Move, sit: Situation, status: Status) -> None:
    """A proven setting read through the training counters: each extra writer suppressed
    where its line calls it, the setting left as the run has it (a reading, not a test of
    the setting)."""
    hyp = sit.state().hypotheses[move.hypothesis or ""]
    arms = writer_arms(
        sit.case,
        sit.ledger,
        hyp,
        timeout_s=sit.opts.timeout_s,
        on_status=lambda m: status("writes", m),
    )
    for arm in arms:
        m = arm_move(arm, gain=move.gain, guided=True, why=arm.hypothesis.statement, cost_s=0.0)
        _arm(m.model_copy(update={"reading": True}), sit, status)
        if sit.validated(arm.hypothesis.id) is not None:
            return
