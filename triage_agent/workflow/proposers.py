"""Proposers: pure functions from the situation to the moves worth making next.

Each proposer reads what the situation holds (observations, hypotheses, every test made,
refuted and failed ones included) and offers moves with their cost, their gain and the
evidence behind them. None decides: the chooser (:mod:`.chooser`) ranks them all together.
None knows a case: each reads one kind of evidence and proposes the general test it asks for.

- :func:`observations`: the bounded scan, the state at the step boundaries, the trace, the
  bisection of differing revisions, each while it is not made.
- :func:`declared`: every declared difference in either direction (B given A's value, else
  A given B's, a flag only one run passes dropped from it); differences that fail to launch
  alone are tried together.
- :func:`observed_state`: what the state at the boundaries showed (a stream not restored, a
  cursor's lost attributes, a writer only one run calls).
- :func:`restores_together`: the restores the state at a resume pointed at, each refuted
  alone, tried together.
- :func:`corresponded`: two frameworks' corresponding boundaries, compared, and the
  interventions on B their first difference's diagnosis asks for.
- :func:`traced`: what the trace showed (an event only one run executes, a draw among them;
  the origin's fix policy; an input no traced event wrote, searched for in earlier steps).
- :func:`resume`: a run that resumes, tested by each restore its evidence points at; a
  refuted restore-rng beside a draw whose generator differs points past the streams, at the
  state a reseed is computed from.
- :func:`readings`: a proven setting read further from the trace of the two runs.
- :func:`narrowings`: a proven path setting whose two values are two trees (a package's two
  versions), narrowed to the hunks of their diff that carry the difference.
- :func:`file_narrowings`: a proven flag that selects one of two files of the job, the two
  files' hunks bisected to those that carry the difference.
- :func:`write_readings`: a proven launch flag, config key or variable read through the
  training counters: a scheduler one run steps through a call the other never makes.
- :func:`site_readings`: a proven setting read through a site a reproducer showed
  misbehaving under B's value of it, by running the reproducer at A's value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from ..records import Classification, EvidenceKind, EvidenceResult, Hypothesis
from .arms import Arm, prior_rerun
from .boundary_state import proven_setting
from .classify import CLASSIFICATION, FIX_POLICY
from .declared import hypothesis_for, selects_computation, uncontrolled
from .moves import Move, arm_move, back_from, draw_window, moved_generator
from .situation import Situation, relaunchable, same_program
from .structural import is_draw
from .tree_narrowing import tree_pair

Proposer = Callable[[Situation], list[Move]]

# Gains: how directly the evidence points at a move's outcome deciding the case.
POINTED = 0.9  # an observation names this very test
TRACED = 0.8  # the trace's events ask for it
NUMERIC_ENV = 0.8  # a variable known to change kernels or reduction orders
ENV = 0.6
COUPLED = 0.6  # a failed launch says the differences go together
SETTING = 0.5  # a declared setting: often the comparison's premise, not its answer
UNPOINTED = 0.3  # a general test no observation asks for


def _hid(*parts: str) -> str:
    return "H-" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:10]


def _untested(sit: Situation, arm: Arm) -> bool:
    return sit.tried(arm) is None


# -- observe -----------------------------------------------------------------------------------
def observations(sit: Situation) -> list[Move]:
    L = sit.launch_s
    out: list[Move] = []
    proven = bool(sit.proven())
    if not sit.scanned() and not proven:
        env_waiting = any(
            d.kind == "env" and _untested(sit, _declared_arm(d, "b"))
            for d in sit.declared
            if d.on("b")
        )
        beside = sit.relaunch and sit.state_arms is None and not env_waiting
        out.append(
            Move(
                key="scan",
                kind="observe",
                what="scan",
                said="bounded static scan of the case and its frameworks, then its reproducers"
                + (", while both runs' state is captured" if beside else ""),
                cost_s=0.3 * L,
                gain=0.6,
                guided=True,
                why=f"the mismatch's phase ({', '.join(sit.rep.phases) or 'unknown'}) selects "
                "the probes",
                beside="state" if beside else None,
            )
        )
    if sit.relaunch and sit.state_arms is None and not proven:
        out.append(
            Move(
                key="state",
                kind="observe",
                what="state",
                said="state of both runs after initialisation and around the last equal step",
                cost_s=1.0 if sit.state_in_baselines else L,
                gain=0.7,
                guided=True,
                why="a step boundary's state (streams, cursors, moments, schedulers) says what a "
                "run carried into the first differing step",
            )
        )
    wants_reading = any(_readable(sit, h) for h in sit.proven())
    if (
        relaunchable(sit.case)
        and not sit.traced
        and ((sit.trace_wanted() and not proven) or wants_reading)
    ):
        step = sit.rep.step or 0
        out.append(
            Move(
                key="trace",
                kind="observe",
                what="trace",
                said=f"trace both runs over steps {max(step - 1, 0)}-{step}, modules then ops",
                cost_s=3 * L,
                gain=0.7,
                guided=True,
                why="the first event whose inputs are equal and whose outputs differ, and the "
                "events only one run executes"
                + ("; a proven setting is read from it" if wants_reading else ""),
                reading=wants_reading,
            )
        )
    if (
        sit.rep.source_differs
        and sit.ma is not None
        and relaunchable(sit.case)
        and not sit.bisected
        and not sit.has_candidate()
    ):
        out.append(
            Move(
                key="bisect",
                kind="observe",
                what="bisect",
                said="bisect the revisions between the runs, then their hunks",
                cost_s=10 * L,
                gain=0.9,
                guided=False,
                why="the runs declare different source revisions",
            )
        )
    return out


# -- declared differences ----------------------------------------------------------------------
def _declared_arm(d, run: str, also: list[str] | None = None, hyp: Hypothesis | None = None) -> Arm:
    return Arm(
        hypothesis=hyp or hypothesis_for(d),
        intervention=d.on(run) or "",
        also=also or [],
        run=run,
        kind=d.kind,
        location=d.location(),
    )


def _setting_proven(sit: Situation) -> list[Hypothesis]:
    """Proven hypotheses that name a global numeric setting (the state observation's)."""
    return [h for h in sit.proven() if sit.where.get(h.id, "").startswith("setting:")]


def declared(sit: Situation) -> list[Move]:
    if not sit.relaunch:
        return []
    proven = sit.proven()
    if proven and not (_setting_proven(sit) == proven and sit.declared):
        return []
    if proven:
        return _who_sets_it(sit)
    L = sit.launch_s
    out: list[Move] = []
    failed: list = []
    for d in sit.declared:
        hyp = hypothesis_for(d)
        if prior_rerun(sit.ledger, hyp.id) is not None:
            continue  # decided (supported or refuted) in one direction
        numeric = d.kind == "env" and _numeric_env(d.key)
        guided = selects_computation(d)
        gain = NUMERIC_ENV if numeric else ENV if guided else SETTING
        why = f"{d.said()}" + (
            "" if guided else "; a setting of the job's own, tested after the observations"
        )
        b_arm = _declared_arm(d, "b") if d.on("b") else None
        if b_arm is not None and _untested(sit, b_arm):
            out.append(arm_move(b_arm, gain=gain, guided=guided, why=why, cost_s=L))
            continue
        if b_arm is not None and sit.failed_to_launch(b_arm):
            failed.append(d)
        a_arm = _declared_arm(d, "a") if d.on("a") else None
        if a_arm is not None and _untested(sit, a_arm):
            side = (
                "B given A's value failed to launch"
                if b_arm is not None
                else "nothing gives B A's value"
            )
            out.append(arm_move(a_arm, gain=gain, guided=guided, why=f"{why}; {side}", cost_s=L))
        elif a_arm is not None and sit.failed_to_launch(a_arm) and d not in failed:
            failed.append(d)
    out += _coupled(sit, failed)
    return out


def _who_sets_it(sit: Situation) -> list[Move]:
    """A proven numeric setting says how the runs differ, not which of their declared
    differences made them so: each declared difference is tested (B given A's value), as part
    of reading the proof, so the verdict can name what the user set."""
    setting = _setting_proven(sit)[0]
    out = []
    for d in sit.declared:
        arm = _declared_arm(d, "b") if d.on("b") else None
        if arm is None or not _untested(sit, arm) or prior_rerun(sit.ledger, arm.hypothesis.id):
            continue
        m = arm_move(
            arm,
            gain=POINTED,
            guided=True,
            why=f"{sit.where.get(setting.id)} is proven; which declared difference sets it: "
            f"{d.said()}",
            cost_s=sit.launch_s,
        )
        out.append(m.model_copy(update={"reading": True}))
    return out


def _numeric_env(key: str) -> bool:
    from ..provenance import NUMERIC_ENV_EXACT, NUMERIC_ENV_PREFIXES

    return key in NUMERIC_ENV_EXACT or key.startswith(NUMERIC_ENV_PREFIXES)


def _coupled(sit: Situation, failed: list) -> list[Move]:
    """A difference whose rerun alone failed to launch, tried with each other difference:
    a framework that refuses one setting without another (a world size and its accumulation
    steps) launches when both are given."""
    out: list[Move] = []
    for d in failed:
        for e in sit.declared:
            if e is d:
                continue
            for run in ("b", "a"):
                first, second = d.on(run), e.on(run)
                if not first or not second:
                    continue
                keys = sorted([f"{d.kind}:{d.key}", f"{e.kind}:{e.key}"])
                hyp = Hypothesis(
                    id=_hid("coupled", run, *keys),
                    statement=f"{d.said()}, and {e.said()}; the two launch only together: "
                    "together they change the bits",
                    category="environment" if d.kind == e.kind == "env" else "config",
                    rationale=f"{d.on(run)} alone on run {run.upper()} failed to launch; tested "
                    f"with {e.on(run)} in the same rerun",
                    classification=CLASSIFICATION.get(
                        "environment" if d.kind == e.kind == "env" else "config",
                        Classification.unknown,
                    ),
                )
                arm = Arm(
                    hypothesis=hyp,
                    intervention=first,
                    also=[second],
                    run=run,
                    kind="coupled",
                    location=f"{d.location()} with {e.location()} (coupled)",
                )
                if _untested(sit, arm) and prior_rerun(sit.ledger, hyp.id) is None:
                    out.append(
                        arm_move(
                            arm,
                            gain=COUPLED,
                            guided=True,
                            why=f"{d.on(run)} alone failed to launch on run {run.upper()}",
                            cost_s=sit.launch_s,
                        )
                    )
                    break  # one direction per pair
    return out


# -- what the state and the trace showed -------------------------------------------------------
def observed_state(sit: Situation) -> list[Move]:
    if sit.proven() or not sit.relaunch:
        return []
    out = []
    for a in sit.state_arms or []:
        if not _untested(sit, a) or prior_rerun(sit.ledger, a.hypothesis.id) is not None:
            continue
        # a seed that differs where the runs were declared to differ may be what they were
        # told to do (another --seed): the declared difference is tested first
        told = a.kind == "seed-value" and bool(sit.declared)
        out.append(
            arm_move(
                a,
                gain=UNPOINTED if told else POINTED,
                guided=not told,
                why=a.hypothesis.statement,
                cost_s=sit.launch_s,
            )
        )
    return out


def restores_together(sit: Situation) -> list[Move]:
    """The restores the state at a resume pointed at, each refuted alone, tried in one rerun:
    a checkpoint that misses several parts (a schedule and an average both a step behind)
    leaves a step differing whichever one is put back alone."""
    if sit.proven() or not sit.relaunch:
        return []
    out: list[Move] = []
    for run in sit.resumed_runs():
        alone = []
        for a in sit.state_arms or []:
            ev = sit.tried(a) if a.run == run and a.intervention.startswith("restore-") else None
            if ev is not None and ev.result == EvidenceResult.refuted:
                alone.append(a)
        if len(alone) < 2:
            continue
        parts = sorted(
            {
                p
                for a in alone
                if a.intervention.startswith("restore-state ")
                for p in a.intervention.split(" ", 1)[1].split(",")
            }
        )
        ivs = [f"restore-state {','.join(parts)}"] if parts else []
        ivs += sorted(
            {a.intervention for a in alone if not a.intervention.startswith("restore-state ")}
        )
        hyp = Hypothesis(
            id=_hid("together", run, *ivs),
            statement=f"run {run.upper()} resumed, and {len(alone)} parts of its state differ "
            f"from the uninterrupted run's ({'; '.join(a.location for a in alone)}): each put "
            "back alone left a step differing; the resume brings none of them back, and "
            "together they carry the difference",
            category="resume-state",
            rationale="restores each refuted alone: "
            + ", ".join(a.intervention for a in alone)
            + "; tested together in one rerun",
            classification=CLASSIFICATION.get("resume-state", Classification.bug),
        )
        arm = Arm(
            hypothesis=hyp,
            intervention=ivs[0],
            also=ivs[1:],
            run=run,
            kind="resume-together",
            location="; ".join(a.location for a in alone),
        )
        if _untested(sit, arm) and prior_rerun(sit.ledger, hyp.id) is None:
            evidence = [ev.id for a in alone if (ev := sit.tried(a)) is not None]
            out.append(
                arm_move(
                    arm,
                    gain=TRACED,
                    guided=True,
                    why=f"{len(alone)} parts of run {run.upper()}'s state differ after its "
                    "resume, and no one of them put back alone made every step match",
                    cost_s=sit.launch_s,
                    evidence=evidence,
                )
            )
    return out


def corresponded(sit: Situation) -> list[Move]:
    """Two frameworks whose baselines captured corresponding boundaries: compare them (no
    launch), then test each intervention on B the first differing boundary's diagnosis asks
    for, over every step like any arm."""
    if sit.boundaries is None:
        return []
    if not sit.corresponded:
        return [
            Move(
                key="correspond",
                kind="observe",
                what="correspond",
                said="compare the corresponding boundaries both runs captured (outputs, "
                "consumed gradients, master weights, moments, counters)",
                cost_s=5.0,
                gain=POINTED,
                guided=True,
                why="both baselines wrote boundary captures: the first differing boundary and "
                "the setting the two optimizers held differently say which policy to align",
            )
        ]
    if sit.proven():
        return []
    return [
        arm_move(
            a,
            gain=POINTED if a.hypothesis.id in sit.correspond_relevant else SETTING,
            guided=a.hypothesis.id in sit.correspond_relevant,
            why=a.hypothesis.statement,
            cost_s=sit.launch_s,
        )
        for a in sit.correspond_arms
        if _untested(sit, a) and prior_rerun(sit.ledger, a.hypothesis.id) is None
    ]


def traced(sit: Situation) -> list[Move]:
    if sit.trace is None or sit.ma is None:
        return []
    proven = sit.proven()
    # A proven setting of the job's own, not yet read, may reach training through a side
    # channel its extra execution opens (a write, a draw): the trace's extra calls are then
    # tested with the setting left as it is, as readings of it.
    side = bool(proven) and all(str(h.category) == "config" for h in proven)
    if proven and not side:
        return []
    evidence = [sit.trace.evidence.id]
    out = [
        arm_move(
            a,
            gain=TRACED,
            guided=True,
            why=a.hypothesis.rationale,
            cost_s=sit.launch_s,
            evidence=evidence,
        ).model_copy(update={"reading": side})
        for a in sit.trace_arms
        if _untested(sit, a) and prior_rerun(sit.ledger, a.hypothesis.id) is None
    ]
    if sit.trace.unproduced and "trace-back" not in sit.done:
        u = sit.trace.unproduced[0]
        out.append(
            Move(
                key="trace-back",
                kind="observe",
                what="trace-back",
                said=f"trace every op of both runs from step {back_from(sit)} to "
                f"{sit.trace.window[1]}: which earlier event wrote the input the first "
                "receiver reads",
                cost_s=3 * sit.launch_s,
                gain=TRACED,
                guided=True,
                why=f"input {u.input} of the first receiver in run {u.run.upper()} was written "
                f"by no event of the traced window (searched {u.searched}): it was carried in "
                "from an earlier step",
                evidence=evidence,
                reading=side,
            )
        )
    if side:
        return out
    if moved_generator(sit) and not any(
        is_draw(a.location) or "isolate-rng" in a.intervention for a in sit.trace_arms
    ):
        lo, step = draw_window(sit) if sit.trace.origin else (0, 0)
        out.append(
            Move(
                key="trace-draws",
                kind="observe",
                what="trace-draws",
                said=f"trace every op of steps {lo}-{step} of both runs: who moved "
                "the generator the first differing draw read",
                cost_s=3 * sit.launch_s,
                gain=TRACED,
                guided=True,
                why=f"the first differing event {sit.trace.origin_location} is a draw whose "
                "generator state differs: something drew or seeded between the last equal "
                "boundary and it",
                evidence=evidence,
            )
        )
    hid = sit.trace.origin_hypothesis
    origin = sit.state().hypotheses.get(hid or "")
    if (
        origin is not None
        and FIX_POLICY.get(str(origin.category))
        and prior_rerun(sit.ledger, origin.id) is None
        and not (sit.has_candidate() and origin.status != "supported")
    ):
        policy = FIX_POLICY[str(origin.category)]
        out.append(
            Move(
                key=f"origin-fix|{origin.id}",
                kind="test",
                what="origin-fix",
                said=f"rerun B uninstrumented with {policy}, the fix the trace origin asks for",
                cost_s=sit.launch_s,
                gain=TRACED,
                guided=True,
                why=f"the trace origin {sit.trace.origin_location}: {origin.statement}",
                evidence=evidence,
                hypothesis=origin.id,
            )
        )
    return out


# -- a run that resumes ------------------------------------------------------------------------
RESTORES = {
    "restore-rng": ("rng-state", "state:rng", "its RNG streams are not restored on resume"),
    "restore-cursors": (
        "cursor-state",
        "state:data cursor",
        "attributes its objects' state_dict leaves out (a position, a counter a seed is "
        "computed from) are not restored on resume",
    ),
    "restore-scheduler": (
        "scheduler-state",
        "state:scheduler",
        "its LR schedule is not restored on resume",
    ),
}


def _origin_draws(sit: Situation) -> bool:
    """The trace's first differing event is a draw (its generator state differs)."""
    t = sit.trace
    if t is None:
        return False
    where = " ".join(x for x in (t.origin_location, t.first_location) if x)
    return any(is_draw(w) for w in where.replace(",", " ").split())


def resume(sit: Situation) -> list[Move]:
    if sit.proven() or not sit.relaunch:
        return []
    tried_by_state = {(a.run, a.intervention) for a in sit.state_arms or []}
    draws = _origin_draws(sit)
    rng_refuted = sit.refuted("restore-rng")
    out: list[Move] = []
    for run in sit.resumed_runs():
        for policy, (category, location, what) in RESTORES.items():
            if (run, policy) in tried_by_state:
                continue
            hyp = Hypothesis(
                id=_hid("resume", policy, run),
                statement=f"run {run.upper()} resumes from a checkpoint and {what}",
                category=category,
                rationale=f"run {run.upper()} is launched as a save and a resume; {policy} on it "
                "tests whether what a resume leaves behind carries the difference",
                classification=CLASSIFICATION.get(category, Classification.unknown),
            )
            arm = Arm(
                hypothesis=hyp,
                intervention=policy,
                run=run,
                kind="resume",
                location=location,
            )
            if not _untested(sit, arm) or prior_rerun(sit.ledger, hyp.id) is not None:
                continue
            guided, gain, why = False, UNPOINTED, f"run {run.upper()} resumes"
            if policy == "restore-rng" and draws:
                guided, gain = True, TRACED
                why = "the first differing event is a draw whose generator state differs"
            elif policy == "restore-cursors" and draws and rng_refuted is not None:
                guided, gain = True, TRACED
                why = (
                    "restore-rng was refuted although the first differing event is a draw whose "
                    "generator state differs: something reseeds between the resume and the draw, "
                    "from state the resume did not bring back"
                )
            out.append(
                arm_move(
                    arm,
                    gain=gain,
                    guided=guided,
                    why=why,
                    cost_s=sit.launch_s,
                    evidence=[rng_refuted.id] if rng_refuted is not None and guided else [],
                )
            )
    return out


# -- reading what is proven --------------------------------------------------------------------
def readings(sit: Situation) -> list[Move]:
    if sit.trace is None:
        return []
    return [
        Move(
            key=f"read-setting|{h.id}",
            kind="read",
            what="read-setting",
            said=f"read the proven setting ({sit.where.get(h.id, h.statement)}) from the trace of "
            "the two runs: a policy, a defect it exposes, or neither",
            cost_s=sit.launch_s,
            gain=POINTED,
            guided=True,
            why=f"{h.statement}, proven by {_proof(sit, h)}",
            evidence=[sit.trace.evidence.id],
            hypothesis=h.id,
        )
        for h in sit.proven()
        if _readable(sit, h)
    ]


def narrowings(sit: Situation) -> list[Move]:
    """A proven path setting (B given A's PYTHONPATH made every step match) whose two values
    differ by one directory in each: the two trees' hunks are bisected to those that carry
    the whole difference. A hunk is a place; a path setting is only where to look."""
    out: list[Move] = []
    for h in sit.proven():
        where = sit.where.get(h.id, "")
        if not where.startswith("env:") or not relaunchable(sit.case):
            continue
        key = where.removeprefix("env:")
        pair = tree_pair(sit.case, key)
        if pair is None:
            continue
        out.append(
            Move(
                key=f"narrow|{key}",
                kind="read",
                what="narrow",
                said=f"bisect the hunks between {key}'s two trees ({pair[0].name} in A, "
                f"{pair[1].name} in B) to those whose revert gives back A's bits",
                cost_s=8 * sit.launch_s,
                gain=POINTED,
                guided=True,
                why=f"{h.statement}, proven by {_proof(sit, h)}; its values name two trees",
                hypothesis=h.id,
            )
        )
    return out


def _unclassified_settings(sit: Situation) -> list[Hypothesis]:
    """The proven flag or config key, read from the trace and left neither a policy nor a
    defect, when nothing else is proven (a reading that proved a place ends the search)."""
    proven = sit.proven()
    return [
        h
        for h in proven
        if sit.where.get(h.id, "").startswith("config:")
        and h.id in sit.read
        and h.classification == Classification.unknown
        and all(p.id == h.id for p in proven)
    ]


def file_narrowings(sit: Situation) -> list[Move]:
    """A proven flag or config key that the reading of the trace could not classify, where
    each run calls into one file of the job's own that the other never does (the setting
    selects one of two implementations): the two files' hunks are bisected, B's setting
    kept, to those that carry the whole difference."""
    if sit.trace is None or not relaunchable(sit.case):
        return []
    out: list[Move] = []
    for h in _unclassified_settings(sit):
        where = sit.where.get(h.id, "")
        pair = sit.selected_files()
        if pair is None:
            continue
        out.append(
            Move(
                key=f"narrow-files|{h.id}",
                kind="read",
                what="narrow-files",
                said=f"bisect the hunks between the files {where} selects ({pair[0].name} in A, "
                f"{pair[1].name} in B) to those whose revert gives back A's bits",
                cost_s=8 * sit.launch_s,
                gain=POINTED,
                guided=True,
                why=f"{h.statement}, proven by {_proof(sit, h)}; each run calls into a file "
                "of the job's own the other never does",
                hypothesis=h.id,
            )
        )
    return out


def counterpart_readings(sit: Situation) -> list[Move]:
    """A proven launch flag or config key the trace could not read, where the two runs may
    each call a function of the job's own the other never calls (the setting selects one of
    two implementations): B with A's same-named function in place of its own. Where each run
    calls into a file the other never does, the files' hunks are bisected instead
    (:func:`file_narrowings`), which names the changed line."""
    if sit.trace is None or not relaunchable(sit.case) or not same_program(sit.case):
        return []
    if any(n.get("counterparts_read") for n in sit.state().notes):
        return []
    if sit.selected_files() is not None:
        return []  # the setting selects a file: its hunks against the other's say the line
    out: list[Move] = []
    for h in _unclassified_settings(sit):
        out.append(
            Move(
                key=f"read-counterparts|{h.id}",
                kind="read",
                what="read-counterparts",
                said="rerun both runs with the job's small values recorded: the same-named "
                "functions each run alone calls, and B with A's in place of its own",
                cost_s=3 * sit.launch_s,
                gain=POINTED,
                guided=True,
                why=f"{h.statement}, proven by {_proof(sit, h)}: the setting may select one of "
                "two implementations of one role",
                hypothesis=h.id,
            )
        )
    return out


def write_readings(sit: Situation) -> list[Move]:
    """A proven declared difference that is not a numerical setting may reach training
    through a call the code it selects makes: a counter written by that call. Read it by a
    write watch on the training counters in both runs. Two stacks' own scripts make their own
    calls by construction: a call only one of them makes says nothing there."""
    if not relaunchable(sit.case) or not same_program(sit.case):
        return []
    out: list[Move] = []
    for h in sit.proven():
        where = sit.where.get(h.id, "")
        if not where.startswith(("config:", "env:")) or str(h.category) == "precision":
            continue
        out.append(
            Move(
                key=f"read-writes|{h.id}",
                kind="read",
                what="read-writes",
                said="rerun both runs with a write watch on the schedulers' counters: a call "
                "only one run makes that moves them",
                cost_s=3 * sit.launch_s,
                gain=ENV,
                guided=True,
                why=f"{h.statement}, proven by {_proof(sit, h)}: the code it selects may make a "
                "call the other run does not",
                hypothesis=h.id,
            )
        )
    return out


def text_readings(sit: Situation) -> list[Move]:
    """A proven launch flag read through what the job's own functions made of its texts: a
    text that restates what the other run has, turned into another value, is a defect at
    that conversion, not a setting (:mod:`.stated_flags`)."""
    if not relaunchable(sit.case) or not same_program(sit.case):
        return []
    out: list[Move] = []
    for h in sit.proven():
        where = sit.where.get(h.id, "")
        if not where.startswith("config:--") or str(h.category) != "config":
            continue
        key = where.removeprefix("config:").split(" ", 1)[0]
        out.append(
            Move(
                key=f"read-text|{h.id}",
                kind="read",
                what="read-text",
                said=f"rerun B with the texts of {key} followed: which function of the job "
                "turns them into values, and whether each value is what its text states",
                cost_s=sit.launch_s,
                gain=ENV,
                guided=True,
                why=f"{h.statement}, proven by {_proof(sit, h)}: a flag's text reaches training "
                "as the value the job's code makes of it",
                hypothesis=h.id,
            )
        )
    return out


def site_readings(sit: Situation) -> list[Move]:
    """A proven setting read through a site a reproducer showed misbehaving under B's value
    of that setting: run the reproducer again at A's value. If the site then behaves, the
    setting reaches training through it, and the site is where the difference is made."""
    from reproducers.params import TEMPLATES, setting_knobs

    st = sit.state()
    out: list[Move] = []
    for p in sit.proven():
        setting = proven_setting(sit.where.get(p.id, ""))
        if setting is None:
            continue
        name, a_value, b_value = setting
        for h in st.hypotheses.values():
            spec = h.reproducer
            if spec is None or h.id == p.id or not h.findings or h.findings[0] not in st.findings:
                continue
            info = TEMPLATES.get(spec.template)
            knobs = setting_knobs(info.params_model) if info else {}
            knob = next((k for k, v in knobs.items() if v == name), None)
            if knob is None or str(spec.params.get(knob)).lower() != b_value.lower():
                continue
            backing = [
                e.id
                for e in st.evidence_for(h.id)
                if e.kind == EvidenceKind.reproducer and e.result == EvidenceResult.supported
            ]
            if not backing:
                continue
            out.append(
                Move(
                    key=f"read-site|{h.id}|{p.id}",
                    kind="read",
                    what="read-site",
                    said=f"rerun {h.id}'s reproducer with {knob}={a_value} (run A's {name}): "
                    "does the site behave under A's setting",
                    cost_s=sum(e.duration_s or 0 for e in st.evidence if e.id in backing) or 10.0,
                    gain=POINTED,
                    guided=True,
                    why=f"{name} is proven ({_proof(sit, p)}); {h.statement} misbehaves under "
                    f"B's value ({b_value}) in its reproducer",
                    evidence=backing,
                    hypothesis=h.id,
                    reading=True,
                )
            )
    return out


def _readable(sit: Situation, h: Hypothesis) -> bool:
    """A proven declared setting whose meaning the trace can still say: a config key or flag
    (a policy, or a defect it exposes), or a variable that pins an input no launch controls
    (an order the job's code took from it)."""
    if h.id in sit.read:
        return False
    return h.category in ("config", "precision") or (
        h.category == "environment" and uncontrolled(sit.where.get(h.id, ""))
    )


def _proof(sit: Situation, h: Hypothesis) -> str:
    ev = sit.validated(h.id)
    if ev is None:
        return "nothing"
    ivs = getattr(ev.data, "interventions", None) or []
    return ", ".join(ivs) or ev.summary


PROPOSERS: tuple[Proposer, ...] = (
    observations,
    declared,
    observed_state,
    restores_together,
    corresponded,
    traced,
    resume,
    readings,
    narrowings,
    file_narrowings,
    counterpart_readings,
    write_readings,
    text_readings,
    site_readings,
)


def propose(sit: Situation) -> list[Move]:
    """Every move the proposers offer that was not made yet, in the proposers' order."""
    seen: set[str] = set()
    out: list[Move] = []
    for proposer in PROPOSERS:
        for m in proposer(sit):
            if m.key in sit.done or m.key in seen:
                continue
            seen.add(m.key)
            out.append(m)
    return out
