"""State at step boundaries: both runs' state after initialisation and around the last equal
step, diffed entry by entry, and what moved a data cursor between two steps tested.

One short relaunch of each run (in parallel) with :mod:`triage_agent.boundary_capture`
injected; each process stops at the first forward of the first differing step, so nothing
after it runs. When the mismatch step was known before the baselines launched, they carried
the capture themselves and nothing is relaunched; the first arm's rerun then starts at once,
beside stage 1. With ``K`` the last step whose metric bits match, the records compared are:

- ``init`` of A against ``init`` of B: parameters, master weights, moments, step counters,
  schedulers, RNG streams and data cursors once initialisation is over;
- ``after-K``: the state step ``K+1`` starts from, in the process that goes on to run it;
- ``step-K+1``: the same at that step's first forward, with the batch it consumed;
- within one run, ``after-K`` as written by the process that reached step ``K`` and as
  rebuilt by a process that resumed from it: a save and load round trip.

Every differing entry is said in one ``manifest`` evidence. Two kinds become hypotheses with
the intervention that tests them: a function only one run calls between ``after-K`` and
``step-K+1`` that writes a data cursor, when the cursor or the batch differs at ``K+1``
(suppress it in that run); RNG streams that a resume did not bring back (restore-rng on the
resumed run); an LR scheduler whose state differs at ``after-K`` in a run that resumed
(restore-scheduler on it); attributes a job's data cursor leaves out of its state_dict that
the resume lost (restore-cursors on the resumed run, the place that state_dict). A hypothesis names the job's own frame that called into the data pipeline, so
a verdict can point at the line of the training loop.

When stage 1 already supports an RNG-state hypothesis, the rerun that the second kind
would ask for (restore-rng on each run that resumes) is started beside the capture: it
does not depend on what the manifests show, only whether it is asked for does, and a launch
round is the largest cost a user waits for. It lands in the run cache under exactly the
label and key the arm uses, so the arm reuses it; nothing is recorded for it until the arm
asks, and a rerun that failed is not cached, so the arm launches it again itself.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..boundary_capture import UNSAVED, BoundaryConfig, launch_env, read_reports
from ..errors import InputError
from ..evidence_data import ManifestData
from ..interventions import parse_intervention, rerun
from ..ledger import Ledger
from ..manifest import AttrWrite, BoundaryRecord, ManifestDiff, SeedCall, diff_manifests
from ..paths import under_run
from ..process import end_side_by_side
from ..records import Case, Classification, Evidence, EvidenceKind, EvidenceResult, Hypothesis
from ..runs import (
    STATE_RECORDS,
    LaunchChanges,
    RunOutcome,
    finished,
    launches_started,
    materialize,
)
from ..settings import PRECISION_SETTINGS, settable
from .arms import Arm, saved_at
from .characterize import MismatchReport
from .classify import CLASSIFICATION
from .markers import done_for
from .structural import _arm

MAX_SAID = 12


class SeedOrder(BaseModel):
    """One seeding both runs make with one value from one line, but with another number of
    the model's parameters already built: the same call in another order of set-up."""

    fn: str
    value: str
    caller: str | None
    built_a: int
    built_b: int
    path_a: list[str] = Field(default_factory=list)
    path_b: list[str] = Field(default_factory=list)

    def place(self, run: str) -> str | None:
        """The outermost frame of ``run``'s path to the seeding that the other run's path
        does not hold: where the two set-ups part."""
        mine, theirs = (self.path_a, self.path_b) if run == "a" else (self.path_b, self.path_a)
        for frame in reversed(mine):
            if frame not in theirs:
                return frame
        return None


class PointDiff(BaseModel):
    """One pair of records compared: which point, which rank, what differs."""

    point: str
    rank: int
    between: str = Field(description="'A vs B', or 'B saved vs B resumed'")
    diff: ManifestDiff
    seeds: list[str] = Field(
        default_factory=list,
        description="seedings made on the way to this point that differ between the two "
        "(another value at the same line, or a seeding only one makes)",
    )
    reordered: list[SeedOrder] = Field(
        default_factory=list,
        description="seedings both make, alike, at another place in their set-up",
    )

    def sentences(self) -> list[str]:
        out = [f"{self.point} rank {self.rank}: {s}" for s in self.seeds]
        out += [
            f"{self.point} rank {self.rank}: seed {o.fn}({o.value}) at {o.caller} made with "
            f"{o.built_a} parameter(s) built in A and {o.built_b} in B (B from "
            f"{o.place('b')}, A from {o.place('a')})"
            for o in self.reordered
        ]
        for d in self.diff.differences:
            what = {
                "data": "data cursor",
                "rng": "RNG stream",
                "scalar": "value",
                "tensor": "tensor",
                "setting": "numeric setting",
                "global": "module global",
            }[d.section]
            if d.path.startswith("batch."):
                what = "batch consumed, input"
            left, right = self.between.split(" vs ")
            out.append(
                f"{self.point} rank {self.rank}: {what} {d.path} differs ({d.reason}): "
                f"{left} {_short(d.a)}, {right} {_short(d.b)}"
            )
        for side, paths in (
            (self.between.split(" vs ")[0], self.diff.only_in_a),
            (self.between.split(" vs ")[1], self.diff.only_in_b),
        ):
            if paths:
                out.append(
                    f"{self.point} rank {self.rank}: only {side} holds {len(paths)} entr"
                    f"{'y' if len(paths) == 1 else 'ies'} ({', '.join(paths[:3])})"
                )
        return out

    def differs(self, section: str, prefix: str = "") -> list[str]:
        return [
            d.path
            for d in self.diff.differences
            if d.section == section and d.path.startswith(prefix)
        ]


class BoundaryState(BaseModel):
    """What the state capture found; kept in the stage marker for a resume."""

    after_step: int | None
    diffs: list[PointDiff] = Field(default_factory=list)
    arms: list[Arm] = Field(default_factory=list)
    said: list[str] = Field(default_factory=list)
    evidence: str | None = None


def _short(v: str | None) -> str:
    return "-" if v is None else (v if len(v) <= 80 else v[:77] + "...")


def likely_reruns(case: Case, supported: list[Hypothesis]) -> list[tuple[str, str]]:
    """(run, intervention) of the arms :func:`rng_arms` would propose, when stage 1 already
    supports an RNG-state cause: restore-rng on each run that resumes (more than one
    command). Only a guess of what to start early; the manifests decide what is tested."""
    if not any(str(h.category) == "rng-state" for h in supported):
        return []
    return [(r.name, "restore-rng") for r in (case.run_a, case.run_b) if len(r.launch) > 1]


def _rerun_early(case: Case, ws: Path, run: str, text: str, timeout_s: float) -> None:
    try:
        limit = min(timeout_s, case.timeout_s)  # as the arm's own rerun is bounded
        rerun(case, run, [parse_intervention(text)], workspace=ws, timeout_s=limit)
    except InputError:
        pass  # cannot be applied: the arm says so itself, if it is asked for


Meanwhile = Callable[[], list[Hypothesis]]


def _until_started(count: int, futures: list[Future], limit_s: float = 60.0) -> None:
    """Until ``count`` run commands have started in this process, or a future ended (its
    run failed before launching), or ``limit_s`` passed."""
    end = time.monotonic() + limit_s
    while launches_started() < count and not any(f.done() for f in futures):
        if time.monotonic() >= end:
            return
        time.sleep(0.05)


def _from_baselines(
    case: Case, ws: Path, k: int | None
) -> dict[str, tuple[RunOutcome, list[BoundaryRecord]]] | None:
    """The state both baselines captured around step K as they ran (the mismatch step was
    known before they launched), when every rank of each wrote its init and step-K+1
    records; else None, and the state relaunch captures it."""
    if k is None:
        return None
    got = {}
    for run in (case.run_a, case.run_b):
        out = finished(run, ws)
        if out is None or out.state_after != k:
            return None
        recs = read_reports(Path(out.out_dir) / STATE_RECORDS, "state-*.json", BoundaryRecord)
        got[run.name] = (out, recs)
    ranks = {run: {r.rank for r in recs} for run, (_, recs) in got.items()}
    if not ranks["a"] or ranks["a"] != ranks["b"]:
        return None
    for _, recs in got.values():
        for rank in ranks["a"]:
            points = {r.point for r in recs if r.rank == rank}
            if not {"init", f"step-{k + 1}"} <= points:
                return None
    return got


def _beside_first_arm(
    case: Case,
    ws: Path,
    arms: list[Arm],
    meanwhile: Meanwhile,
    timeout_s: float,
    on_status: Callable[[str], None],
) -> None:
    """Stage 1 (``meanwhile``) in this thread while the first arm's rerun runs: with the
    state already at hand, that rerun is what the workflow asks for next. It lands in the
    run cache under the arm's own label and key, as :func:`_rerun_early`'s do."""
    if not arms:
        meanwhile()
        return
    arm = arms[0]
    on_status(f"{arm.intervention} on {arm.run.upper()}, uninstrumented, beside stage 1")
    launched = launches_started()
    with ThreadPoolExecutor(1) as pool:
        early = pool.submit(_rerun_early, case, ws, arm.run, arm.intervention, timeout_s)
        try:
            _until_started(launched + 1, [early])
            meanwhile()
            early.result()
        except BaseException:
            end_side_by_side(pool)
            raise


def _capture(
    case: Case,
    ledger: Ledger,
    k: int | None,
    step: int,
    timeout_s: float,
    on_status,
    supported: list[Hypothesis],
    meanwhile: Meanwhile | None,
) -> dict[str, tuple[RunOutcome, list[BoundaryRecord]]]:
    ws = Path(ledger.workspace)
    base = ws / "state" / f"step{step}"
    quiet = threading.Event()  # set while `meanwhile` reports in the main thread

    def progress(msg: str) -> None:
        if not quiet.is_set():
            on_status(msg)

    def one(run) -> tuple[RunOutcome, list[BoundaryRecord]]:
        d = (base / run.name).resolve()
        rec = d / "records"
        if rec.exists():
            for p in rec.glob("state-*"):
                p.unlink()  # a record of an earlier attempt must not pair with this one
        d.mkdir(parents=True, exist_ok=True)
        cfg = d / "config.json"
        # a run of several commands: the process that saves must reach its own end, or the
        # next one resumes from another checkpoint than the run's
        several = len(run.launch) > 1
        cfg.write_text(
            BoundaryConfig(
                out_dir=str(rec), after_step=k, stop_only_resumed=several
            ).model_dump_json()
        )
        pp = run.env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
        changes = LaunchChanges(env=launch_env(cfg, pp))
        out = materialize(
            run, ws, "state", timeout_s=timeout_s, reuse=False, progress=progress, changes=changes
        )
        return out, read_reports(rec, "state-*.json", BoundaryRecord)

    launched = launches_started()
    with ThreadPoolExecutor(4) as pool:
        fa, fb = pool.submit(one, case.run_a), pool.submit(one, case.run_b)
        try:
            if meanwhile is not None:
                # the stage clock gives a launch to the stage current when it starts: both
                # relaunches' first commands are the state's, so they start before stage 1
                _until_started(launched + 2, [fa, fb])
                quiet.set()
                try:
                    supported = meanwhile()
                finally:
                    quiet.clear()
            beside = likely_reruns(case, supported) if k is not None else []
            if beside:
                said = ", ".join(f"{text} on {run.upper()}" for run, text in beside)
                on_status(f"{said}, uninstrumented, beside the state relaunches")
            early = [
                pool.submit(_rerun_early, case, ws, run, text, timeout_s) for run, text in beside
            ]
            got = {"a": fa.result(), "b": fb.result()}
            for f in early:  # ended before the arms run: one launch per run directory
                f.result()
            return got
        except BaseException:
            end_side_by_side(pool)
            raise


def _pick(recs: list[BoundaryRecord], point: str, rank: int, pid: int | None = None):
    found = [r for r in recs if r.point == point and r.rank == rank]
    if pid is not None:
        found = [r for r in found if r.pid == pid] or found
    return found[-1] if found else None


def _round_trip(recs: list[BoundaryRecord], k: int, rank: int):
    """(saved, resumed): the state one process reached at step K and the state another
    rebuilt from it, when the run resumed there."""
    both = [r for r in recs if r.point == f"after-{k}" and r.rank == rank]
    resumed = _pick(recs, f"step-{k + 1}", rank)
    saved = [r for r in both if resumed is None or r.pid != resumed.pid]
    if resumed is None or not saved or len(both) < 2:
        return None
    # the saving process at its end, when the last step it logged is K: the state its
    # checkpoint should hold, also when it saved inside step K+1 (an accumulation window)
    end = [r for r in recs if r.point == f"end-{k}" and r.pid == saved[-1].pid and r.rank == rank]
    return (end or saved)[-1], _pick(both, f"after-{k}", rank, resumed.pid)


def _point_order(point: str) -> tuple[int, int]:
    """Where a point falls in a process's life: step K's first forward, then its report,
    then a checkpoint written after it (records are read in file-name order, not time)."""
    kind, _, k = point.partition("-")
    if kind == "init" or not k.lstrip("-").isdigit():
        return (-1, 0)
    return (int(k), {"step": 0, "after": 1, "end": 2}.get(kind, 3))


def _previous(recs: list[BoundaryRecord], rec: BoundaryRecord) -> str | None:
    """The point of the record the same process wrote before ``rec``, if any."""
    mine = sorted(
        (r for r in recs if r.pid == rec.pid and r.rank == rec.rank),
        key=lambda r: _point_order(r.point),
    )
    k = next((i for i, r in enumerate(mine) if r is rec), 0)
    return mine[k - 1].point if k > 0 else None


def _moved_before_save(recs: list[BoundaryRecord], k: int, rank: int):
    """(logged, resumed) when the saving process's model moved between logging step K and
    writing its checkpoint (an update ran in between: the file holds a later step's state
    under step K's name), else None."""
    trip = _round_trip(recs, k, rank)
    if trip is None or trip[0].point != f"end-{k}":
        return None
    logged = _pick(recs, f"after-{k}", rank, trip[0].pid)
    if logged is None:
        return None
    moved = diff_manifests(logged.manifest, trip[0].manifest).differences
    if not any(e.section == "tensor" and e.path.startswith("model.") for e in moved):
        return None
    return logged, trip[1]


def compare_records(recs: dict[str, list[BoundaryRecord]], k: int | None) -> list[PointDiff]:
    """Every pair of records the module docstring lists, diffed."""
    diffs: list[PointDiff] = []
    ranks = sorted({r.rank for r in recs["a"]} & {r.rank for r in recs["b"]})
    nxt = f"step-{k + 1}" if k is not None else None
    for rank in ranks:
        step_a = _pick(recs["a"], nxt, rank) if nxt else None
        step_b = _pick(recs["b"], nxt, rank) if nxt else None
        pairs = [("init", _pick(recs["a"], "init", rank), _pick(recs["b"], "init", rank))]
        if k is not None:
            pairs.append(
                (
                    f"after-{k}",
                    _pick(recs["a"], f"after-{k}", rank, step_a.pid if step_a else None),
                    _pick(recs["b"], f"after-{k}", rank, step_b.pid if step_b else None),
                )
            )
            pairs.append((nxt, step_a, step_b))
        for point, ra, rb in pairs:
            if ra is not None and rb is not None:
                d = diff_manifests(ra.manifest, rb.manifest)
                # seeds and draws are those made since the process's previous record: two
                # records whose previous ones are other points (a resumed process's first
                # record against the uninterrupted run's) cover other spans of work
                same_span = _previous(recs["a"], ra) == _previous(recs["b"], rb)
                diffs.append(
                    PointDiff(
                        point=point,
                        rank=rank,
                        between="A vs B",
                        diff=d,
                        seeds=seed_differences(ra.seeds, rb.seeds)
                        + draw_differences(ra.draws, rb.draws)
                        if same_span
                        else [],
                        reordered=seed_orders(ra.seeds, rb.seeds) if same_span else [],
                    )
                )
        if k is None:
            continue
        for run in ("a", "b"):
            trip = _round_trip(recs[run], k, rank)
            if trip is not None:
                d = diff_manifests(trip[0].manifest, trip[1].manifest)
                who = run.upper()
                diffs.append(
                    PointDiff(
                        point=f"after-{k}",
                        rank=rank,
                        between=f"{who} saved vs {who} resumed",
                        diff=d,
                    )
                )
            moved = _moved_before_save(recs[run], k, rank)
            if moved is not None:
                diffs.append(
                    PointDiff(
                        point=f"after-{k}",
                        rank=rank,
                        between=f"{who} logged vs {who} resumed",
                        diff=diff_manifests(moved[0].manifest, moved[1].manifest),
                    )
                )
    return diffs


def order_arms(case: Case, ledger: Ledger, draw_caller: str | None) -> list[Arm]:
    """The first differing draw reads a generator whose state differs, and the state check
    saw a seeding both runs make alike but at another place in their set-up (before the
    model's parameters in one, after them in the other): the draws the model's
    construction makes then come from another seed. The function that makes that draw,
    run under every generator seeded from its own call in both runs (``seed-rng``), takes
    the order out; every step matching proves it, and the place is where the one run's
    set-up reached the seeding first."""
    from .structural import call_site

    marks = [m for m in ledger.state().stages if m.get("stage") == "state" and m.get("result")]
    if not marks or not draw_caller:
        return []
    found = BoundaryState.model_validate(marks[-1]["result"])
    orders = [o for d in found.diffs if d.between == "A vs B" for o in d.reordered]
    site = call_site(draw_caller.split(" ", 1)[0], case.run_b.cwd)
    if not orders or site is None or site.target is None or site.target.startswith("__main__"):
        return []
    o = orders[0]
    early = "b" if o.built_b < o.built_a else "a"
    place = o.place(early)
    if place is None:
        return []
    where = f"{under_run(place.split(' (')[0], (case.run_b if early == 'b' else case.run_a).cwd)}"
    built = {"a": o.built_a, "b": o.built_b}
    late = "a" if early == "b" else "b"
    return [
        _state_arm(
            "both",
            f"seed-rng {site.target}",
            "seed-value",
            where,
            f"run {early.upper()} reaches {o.fn}({o.value}) at {o.caller} from {where} with "
            f"{built[early]} parameter(s) built, run {late.upper()} with {built[late]}: the "
            f"draws {site.target} makes to build the model come from that seed in one run "
            "and not the other",
            f"seed-order|{site.target}|{where}",
        )
    ]


def seed_orders(sa: list[SeedCall], sb: list[SeedCall]) -> list[SeedOrder]:
    """Seedings paired as :func:`seed_differences` pairs them, alike in value, made with
    another number of parameters built."""
    key_a = [(s.fn, s.caller) for s in sa]
    key_b = [(s.fn, s.caller) for s in sb]
    sm = difflib.SequenceMatcher(a=key_a, b=key_b, autojunk=False)
    out: list[SeedOrder] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            continue
        for a, b in zip(sa[i1:i2], sb[j1:j2], strict=True):
            if a.value == b.value and None not in (a.built, b.built) and a.built != b.built:
                out.append(
                    SeedOrder(
                        fn=a.fn,
                        value=a.value,
                        caller=a.caller,
                        built_a=a.built,
                        built_b=b.built,
                        path_a=a.path,
                        path_b=b.path,
                    )
                )
    return out[:4]


def seed_differences(sa: list[SeedCall], sb: list[SeedCall]) -> list[str]:
    """The seedings two processes made on the way to the same point, paired by what was
    called from where, in order: another value, or a seeding only one of them makes."""
    out: list[str] = []
    key_a = [(s.fn, s.caller) for s in sa]
    key_b = [(s.fn, s.caller) for s in sb]
    sm = difflib.SequenceMatcher(a=key_a, b=key_b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out += [
                f"seed {a.fn}({a.value}) in A, ({b.value}) in B, at {a.caller or 'an unknown line'}"
                for a, b in zip(sa[i1:i2], sb[j1:j2], strict=True)
                if a.value != b.value
            ]
            continue
        out += [f"seed {a.fn}({a.value}) only in A, at {a.caller}" for a in sa[i1:i2]]
        out += [f"seed {b.fn}({b.value}) only in B, at {b.caller}" for b in sb[j1:j2]]
    return out[:8]


def draw_differences(da: dict[str, int], db: dict[str, int]) -> list[str]:
    """Draws from numpy's and python's global generators one run makes more often."""
    return [
        f"draw {key}: {da.get(key, 0)} in A, {db.get(key, 0)} in B"
        for key in sorted(set(da) | set(db))
        if da.get(key, 0) != db.get(key, 0)
    ][:8]


def _writes_key(w: AttrWrite, cwd: str | None) -> tuple[str, str]:
    caller = w.caller or ""
    if cwd and caller.startswith(cwd.rstrip("/") + "/"):
        caller = caller[len(cwd.rstrip("/")) + 1 :]
    return (w.target, caller)


def writer_arms(
    case: Case,
    recs: dict[str, list[BoundaryRecord]],
    k: int,
    diffs: list[PointDiff],
    outs: dict[str, RunOutcome],
) -> tuple[list[Arm], list[str]]:
    """Functions only one run calls between after-K and step-K+1 that write a data cursor."""
    nxt = f"step-{k + 1}"
    moved = [
        d
        for d in diffs
        if d.point == nxt
        and d.between == "A vs B"
        and (d.differs("data") or d.differs("tensor", "batch."))
    ]
    arms: list[Arm] = []
    said: list[str] = []
    seen: set[str] = set()
    for d in moved:
        ra, rb = _pick(recs["a"], nxt, d.rank), _pick(recs["b"], nxt, d.rank)
        cursor = {
            "a": (ra.manifest.data_cursor or {}) if ra else {},
            "b": (rb.manifest.data_cursor or {}) if rb else {},
        }
        keys = {
            run: {_writes_key(w, outs[run].cwd) for w in rec.writes}
            for run, rec in (("a", ra), ("b", rb))
            if rec is not None
        }
        if len(keys) < 2:
            continue
        for run, rec, other in (("b", rb, "a"), ("a", ra, "b")):
            for w in rec.writes:
                key = _writes_key(w, outs[run].cwd)
                if key in keys[other] or w.target in seen:
                    continue
                seen.add(w.target)
                attrs = sorted({x.attr for x in rec.writes if x.target == w.target})
                values = ", ".join(
                    f"{x.attr}={x.value}" for x in rec.writes if x.target == w.target
                )[:200]
                where = f"{w.caller} ({w.caller_function})" if w.caller else w.site
                obj = w.obj.split(":", 1)[-1]
                said_call = (
                    f"only run {run.upper()} calls {w.target} (from {where}) between step {k} "
                    f"and step {k + 1}, which writes {obj}.{'/'.join(attrs)} ({values}); at step "
                    f"{k + 1} run A's data cursor is {cursor['a'].get(w.obj)}, run B's "
                    f"{cursor['b'].get(w.obj)}"
                )
                if w.target.startswith("__main__:") or "<locals>" in w.target:
                    said.append(
                        f"{said_call}: a function of the script itself, no patch reaches it"
                    )
                    continue
                arms.append(
                    _arm(
                        run,
                        f"suppress {w.target}",
                        where,
                        f"{said_call}: this call moves the data cursor",
                        f"the state manifests of both runs at step {k + 1} differ in the data "
                        f"consumed; suppressing in run {run.upper()} alone the one cursor writer "
                        "the other run does not call tests it",
                    )
                )
    return arms, said


def _state_arm(run: str, intervention: str, category: str, location: str, statement: str, key: str):
    hid = "H-" + hashlib.sha256(key.encode()).hexdigest()[:10]
    return Arm(
        run=run,
        intervention=intervention,
        kind=category,
        location=location,
        hypothesis=Hypothesis(
            id=hid,
            statement=statement,
            category=category,
            rationale="state manifests at the resume boundary",
            classification=CLASSIFICATION.get(category, Classification.unknown),
        ),
    )


# the calls that set a stream's state as a whole (what a resume's restore makes)
_STREAM_SETTERS = {
    "torch_cpu": ("torch.set_rng_state", "torch.random.set_rng_state"),
    "torch_cuda": ("torch.cuda.set_rng_state",),
    "numpy": ("numpy.random.set_state",),
    "python": ("random.setstate",),
}


def _stream_set_at(
    recs: dict[str, list[BoundaryRecord]] | None, run: str, d: PointDiff, streams: list[str]
) -> str | None:
    """The job's line where the resumed process set one of ``streams`` as a whole, before
    the boundary ``d`` compares (the restore that put back another state), if it did."""
    for r in (recs or {}).get(run, []):
        if r.point != d.point or r.rank != d.rank:
            continue
        for seed in r.seeds:
            for stream in streams:
                setters = next((v for k, v in _STREAM_SETTERS.items() if stream.startswith(k)), ())
                if seed.fn in setters and seed.caller:
                    return f"{seed.caller.split(' (')[0]} (sets {stream} in the resumed process)"
    return None


def rng_arms(
    diffs: list[PointDiff], recs: dict[str, list[BoundaryRecord]] | None = None
) -> list[Arm]:
    """RNG streams a resume did not bring back: restore-rng on the resumed run. Where the
    resumed process set such a stream as a whole (its restore), that line is the place:
    it put back another state than the saving process had."""
    for d in diffs:
        if " saved vs " not in d.between or not d.differs("rng"):
            continue
        run = d.between[0].lower()
        streams = ", ".join(d.differs("rng"))
        set_at = _stream_set_at(recs, run, d, d.differs("rng"))
        statement = (
            f"run {run.upper()}'s RNG streams {streams} after step "
            f"{d.point.removeprefix('after-')} differ between the process that saved "
            "them and the one that resumed from them: the resume does not restore them"
            + (
                f" (the resumed process sets them at {set_at.split(' (')[0]}, to another state)"
                if set_at
                else ""
            )
        )
        where = set_at or f"state:rng ({streams} not restored on resume)"
        return [
            _state_arm(
                run, "restore-rng", "rng-state", where, statement, f"resume-rng|{run}|{streams}"
            )
        ]
    return []


def scheduler_arms(case: Case, diffs: list[PointDiff]) -> list[Arm]:
    """An LR scheduler whose state differs at the last equal step, in a run that resumed:
    the schedule may not have come back with the rest (restore-scheduler on that run). The
    first differing step need not be the first resumed one: a schedule restarted at a resume
    may set its first wrong rate a step later."""
    resumed = [r.name for r in (case.run_b, case.run_a) if len(r.launch) > 1]
    for d in diffs:
        entries = d.differs("scalar", "scheduler")
        if not entries or not d.point.startswith("after-"):
            continue
        runs = [d.between[0].lower()] if " saved vs " in d.between else resumed
        for run in (r for r in runs if r in resumed):
            said = ", ".join(entries[:4])
            statement = (
                f"run {run.upper()} resumed, and its LR scheduler state after step "
                f"{d.point.removeprefix('after-')} differs ({d.between}: {said}): the resume "
                "does not bring the schedule back"
            )
            where = f"state:scheduler ({said} not restored on resume)"
            return [
                _state_arm(
                    run,
                    "restore-scheduler",
                    "scheduler-state",
                    where,
                    statement,
                    f"resume-scheduler|{run}|{said}",
                )
            ]
    return []


def part_arms(case: Case, diffs: list[PointDiff]) -> list[Arm]:
    """Parts of training state that differ between A and B where step K+1 starts, in a run
    that resumed at K, while the model itself is equal there: a second top-level module (a
    teacher, an EMA copy) or the optimizer's per-parameter state by name (moments attached to
    other parameters). The saving process's values are put back after the resume
    (restore-state PART on the resumed run)."""
    resumed = [r.name for r in (case.run_b, case.run_a) if len(r.launch) > 1]
    out: list[Arm] = []
    for d in diffs:
        if d.between != "A vs B" or not d.point.startswith("step-") or not resumed:
            continue
        if d.differs("tensor", "model.") or d.differs("scalar", "model."):
            continue  # the model itself differs: a part is not what the resume left behind
        parts = sorted(
            {
                p.split(".", 1)[0]
                for p in d.differs("tensor") + d.differs("scalar")
                if p.split(".", 1)[0][:5] == "model" and p.split(".", 1)[0][5:].isdigit()
            }
        )
        if d.differs("tensor", "optimizer_by_param.") or d.differs("scalar", "optimizer_by_param."):
            parts.append("optimizer")
        k = int(d.point.removeprefix("step-")) - 1
        run = resumed[0]
        for part in parts:
            said = (
                "the optimizer's state per parameter, by name"
                if part == "optimizer"
                else f"top-level module {part}"
            )
            out.append(
                _state_arm(
                    run,
                    f"restore-state {part}",
                    "resume-state",
                    f"state:{part} (not restored on resume)",
                    f"run {run.upper()} resumed at step {k}, and where step {k + 1} starts "
                    f"{said} differs from the uninterrupted run's while the model is equal: "
                    "the resume does not bring it back",
                    f"resume-part|{run}|{part}",
                )
            )
    return out[:2]


STRUCTURE_PARTS = {
    "model": "the model's own weights",
    "grads": "the parameters' accumulated gradients",
    "ties": "which parameter names share one tensor (and which tensors the optimizer holds)",
    "modes": "the modules' training modes (and which parameters train)",
    "hooks": "the hooks the model's modules and parameters hold",
    "buffers": "the buffers the model's modules register outside their state_dict",
    "groups": "the optimizer's param groups' hyper-parameters",
}


def _grads_since_boundary(recs: list[BoundaryRecord], k: int | None, rank: int) -> bool:
    """Whether the saving process wrote its checkpoint with gradients other than those it
    held when step K ended: it saved inside step K+1 (an accumulation window under way).
    Gradients left over at a step boundary are what the next step zeroes; those summed
    since are what a resume must carry."""
    if k is None:
        return False
    ends = [r for r in recs if r.point == f"end-{k}" and r.rank == rank]
    if not ends:
        return False
    after = _pick(recs, f"after-{k}", rank, ends[-1].pid)
    if after is None:
        return False

    def grads_of(r: BoundaryRecord) -> dict[str, Any]:
        return {p: t for p, t in r.manifest.tensors.items() if p.startswith("model_grads.")}

    return grads_of(after) != grads_of(ends[-1])


def structure_arms(
    diffs: list[PointDiff],
    recs: dict[str, list[BoundaryRecord]] | None = None,
    k: int | None = None,
) -> list[Arm]:
    """Training state no state_dict holds that differs between the process that saved and
    the one that resumed from it: gradients accumulated inside the step the save cut,
    parameters tied in one and untied in the other, modules left in another mode, hooks
    registered again, buffers registered outside the state_dict. The saving process's is put
    back after the resume (restore-state PART on the resumed run)."""
    out: list[Arm] = []
    for d in diffs:
        if " saved vs " not in d.between:
            continue
        only = [p.split(":", 1)[1] for p in d.diff.only_in_a + d.diff.only_in_b]
        differ = d.differs("tensor") + d.differs("scalar") + only
        run = d.between[0].lower()
        cut = _grads_since_boundary((recs or {}).get(run, []), k, d.rank)
        parts = {
            # the checkpoint's round trip changes the model itself (a save in lower
            # precision, a part dropped and rebuilt)
            "model": any(p.startswith("model.") for p in d.differs("tensor")),
            "grads": cut and any(p.startswith("model_grads.") for p in differ),
            "ties": any(
                p in ("model_structure.tied", "model_structure.outside_optimizer") for p in differ
            ),
            "modes": any(
                p in ("model_structure.eval_modules", "model_structure.frozen") for p in differ
            ),
            "hooks": "model_structure.hooks" in differ,
            "buffers": any(p.startswith("model_unsaved.") for p in differ),
            # a hyper-parameter the checkpoint carried and the resumed process changed
            "groups": any(re.match(r"optimizer\d*\.param_groups\[", p) for p in differ),
        }
        at = d.point.removeprefix("after-")
        for part in (p for p, hit in parts.items() if hit):
            what = part
            if part == "model" and any(
                p.startswith(("optimizer.", "optimizer_by_param.")) for p in d.differs("tensor")
            ):
                # the optimizer's state went through the same round trip: a model put back
                # alone would meet moments of another step
                what = "model,optimizer"
            out.append(
                _state_arm(
                    run,
                    f"restore-state {what}",
                    "resume-state",
                    f"state:{part} (not restored on resume)",
                    f"run {run.upper()} resumed after step {at}, and {STRUCTURE_PARTS[part]} "
                    "differ between the process that saved and the one that resumed: the "
                    "resume does not bring them back as they were saved",
                    f"resume-structure|{run}|{part}",
                )
            )
    return out[:4]


def _one_run_holds(diffs: list[PointDiff], key: str) -> tuple[PointDiff, str, str, str] | None:
    """(the diff, the run, its names, them shown) where a structure entry listing names is
    non-empty in one run only (A vs B), at the first point that says so."""
    for d in diffs:
        if d.between != "A vs B":
            continue
        e = next((e for e in d.diff.differences if e.path == key), None)
        if e is None:
            continue
        a, b = (_plain_str(v) for v in (e.a, e.b))
        if (a == "") == (b == ""):
            continue  # both hold some, or neither: no one run to test
        names = (a or b).split(",")
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return d, "a" if b == "" else "b", a or b, shown
    return None


def membership_arms(diffs: list[PointDiff]) -> list[Arm]:
    """One run trains with parameters its optimizer does not hold while the other run's
    optimizer holds every parameter its model has (at the same point): the first run's
    optimizer updates tensors the model no longer uses, and the new ones never move (a layer
    replaced after the optimizer was built). ``rebind-optimizer`` on that run tests it."""
    found = _one_run_holds(diffs, "model_structure.outside_optimizer")
    if found is not None:
        d, run, outside, shown = found
        return [
            _state_arm(
                run,
                "rebind-optimizer",
                "optimizer-membership",
                f"state:optimizer-membership ({shown} outside run {run.upper()}'s optimizer)",
                f"run {run.upper()} trains with parameters its optimizer does not hold "
                f"({shown}, at {d.point}) while the other run's optimizer holds them all: "
                "its optimizer updates tensors the model no longer uses",
                f"membership|{run}|{outside}",
            )
        ]
    return []


def tie_arms(recs: dict[str, list[BoundaryRecord]]) -> list[Arm]:
    """After initialisation one run's model ties a group of parameter names (one tensor) and
    the other run holds as many parameters of its own, each starting from the tied tensor's
    bytes, and no others with them (a port that copies a weight instead of sharing it): the
    copies train apart. ``tie-params`` on the run that holds them apart tests it. Pairing is
    by the bytes at initialisation, so names a port changed pair too."""
    out: list[Arm] = []
    for rank in sorted({r.rank for rs in recs.values() for r in rs}):
        init = {
            run: next((r for r in rs if r.rank == rank and r.point == "init"), None)
            for run, rs in recs.items()
        }
        if init.get("a") is None or init.get("b") is None:
            continue
        for tied_run, other in (("a", "b"), ("b", "a")):
            have, apart = init[tied_run].manifest, init[other].manifest  # type: ignore[union-attr]
            tied_there = {
                frozenset(g.split("="))
                for g in _plain_str(apart.scalars.get("model_structure.tied")).split(";")
                if g
            }
            for group in _plain_str(have.scalars.get("model_structure.tied")).split(";"):
                names = [n for n in group.split("=") if n]
                entry = next((have.tensors.get(f"model.{n}") for n in names), None)
                if len(names) < 2 or entry is None:
                    continue
                same = sorted(
                    p.removeprefix("model.")
                    for p, e in apart.tensors.items()
                    if p.startswith("model.")
                    and e.sha256 == entry.sha256
                    and e.shape == entry.shape
                )
                held = [p for p, e in have.tensors.items() if e.sha256 == entry.sha256]
                if (
                    len(same) != len(names)
                    or any(p.removeprefix("model.") not in names for p in held)
                    or frozenset(same) in tied_there
                ):
                    continue  # the bytes are not the tie's alone, or the other run ties them
                said = " and ".join(same)
                out.append(
                    _state_arm(
                        other,
                        f"tie-params {'='.join(same)}",
                        "weight-ties",
                        f"state:ties ({said} apart in run {other.upper()})",
                        f"run {tied_run.upper()}'s model shares one tensor between "
                        f"{' and '.join(names)}; run {other.upper()}'s holds {said} as "
                        "parameters of their own, each starting from that tensor's bytes: they "
                        "train apart",
                        f"ties|{other}|{'='.join(same)}",
                    )
                )
        if out:
            return out[:2]
    return out


def repeat_arms(diffs: list[PointDiff]) -> list[Arm]:
    """One run's optimizer lists a parameter twice (updated twice by each step) where the
    other run's lists each once: ``unique-params`` on that run tests it."""
    found = _one_run_holds(diffs, "model_structure.held_twice")
    if found is not None:
        d, run, twice, shown = found
        return [
            _state_arm(
                run,
                "unique-params",
                "optimizer-membership",
                f"state:optimizer-membership ({shown} listed twice by run {run.upper()}'s "
                "optimizer)",
                f"run {run.upper()}'s optimizer lists {shown} twice (at {d.point}) while the "
                "other run's lists each parameter once: each step updates it twice",
                f"repeat|{run}|{twice}",
            )
        ]
    return []


def hook_arms(diffs: list[PointDiff]) -> list[Arm]:
    """One run's modules hold forward hooks (or pre-hooks) the other run's do not: what a
    hook returns replaces the module's output (its input). ``observe-hooks`` on that run, its
    hooks run and their values dropped, tests it."""
    key = "model_structure.hooks"
    for d in diffs:
        if d.between != "A vs B":
            continue
        e = next((e for e in d.diff.differences if e.path == key), None)
        if e is None:
            continue
        held = {
            run: {h for h in _plain_str(v).split(",") if ":forward_" in h}
            for run, v in (("a", e.a), ("b", e.b))
        }
        for run, other in (("b", "a"), ("a", "b")):
            extra = sorted(h.split("=", 1)[0] for h in held[run] - held[other])
            if not extra or held[other] - held[run]:
                continue
            shown = ", ".join(extra[:4]) + (f" and {len(extra) - 4} more" if len(extra) > 4 else "")
            return [
                _state_arm(
                    run,
                    "observe-hooks",
                    "extra-call",
                    f"state:hooks ({shown} only in run {run.upper()})",
                    f"run {run.upper()}'s modules hold forward hooks the other run's do not "
                    f"({shown}, at {d.point}): what a hook returns replaces what the module "
                    "computes",
                    f"hooks|{run}|{','.join(extra)}",
                )
            ]
    return []


def scaler_arms(recs: dict[str, list[BoundaryRecord]]) -> list[Arm]:
    """A run whose GradScaler scales its gradients may clip them before it unscales them:
    ``unscale-first`` on that run (B first) tests it, the rest as the run has it."""
    out: list[Arm] = []
    for run in ("b", "a"):
        init = next((r for r in recs[run] if r.point == "init"), None)
        held = init.manifest.scalars.get("model_structure.grad_scaler") if init else None
        if not held or not _plain_str(held):
            continue
        out.append(
            _state_arm(
                run,
                "unscale-first",
                "amp-order",
                f"state:grad-scaler (run {run.upper()} clips scaled gradients)",
                f"run {run.upper()} clips its gradients while its GradScaler "
                f"({_plain_str(held)}) still holds them scaled: the clip meets the scaled "
                "norm",
                f"amp-order|{run}",
            )
        )
    return out


def _plain_str(v: str | None) -> str:
    """The text of a manifest's string scalar (``str:'...'``)."""
    v = v or ""
    if v.startswith("str:"):
        v = v[4:]
    return v.strip("'\"")


def later_state_arms(diffs: list[PointDiff]) -> list[Arm]:
    """The saving process's model moved between logging step K and writing the checkpoint
    the other process resumed from, and what that process starts from differs from the
    state step K ended with: the checkpoint holds a later step's state under step K's name.
    The state as step K left it is put back (restore-state, which takes it from the logged
    step when an update ran before the save)."""
    out: list[Arm] = []
    for d in diffs:
        if " logged vs " not in d.between:
            continue
        differ = d.differs("tensor")
        parts = [p for p in ("model", "optimizer") if any(x.startswith(f"{p}.") for x in differ)]
        if any(x.startswith("optimizer_by_param.") for x in differ) and "optimizer" not in parts:
            parts.append("optimizer")
        if "model" not in parts:
            continue
        run = d.between[0].lower()
        k = d.point.removeprefix("after-")
        out.append(
            _state_arm(
                run,
                "restore-state " + ",".join(parts),
                "resume-state",
                f"state:{','.join(parts)} (the checkpoint of step {k} holds a later state)",
                f"run {run.upper()}'s saving process updated the model after logging step {k} "
                f"and before writing the checkpoint it resumed from, and the resumed process "
                f"starts from another state than step {k} ended with: the checkpoint holds a "
                f"later step's state under step {k}'s name",
                f"resume-later|{run}|{','.join(parts)}",
            )
        )
    return out[:1]


def epoch_arms(case: Case, recs: dict[str, list[BoundaryRecord]], k: int | None) -> list[Arm]:
    """Where the first differing step starts, one run's loader has its sampler at an earlier
    epoch than the other's, in runs that do not resume (a resume's cursors are
    restore-cursors'): that run does not advance the epoch its sampler shuffles by.
    ``advance-epochs`` on that run tests it."""
    if k is None:
        return []
    nxt = f"step-{k + 1}"
    for rank in sorted({r.rank for r in recs["a"]} & {r.rank for r in recs["b"]})[:1]:
        ra, rb = _pick(recs["a"], nxt, rank), _pick(recs["b"], nxt, rank)
        if ra is None or rb is None:
            continue
        ca, cb = ra.manifest.data_cursor or {}, rb.manifest.data_cursor or {}
        for name in sorted(set(ca) & set(cb)):
            ea = (ca[name] or {}).get("sampler_epoch") if isinstance(ca[name], dict) else None
            eb = (cb[name] or {}).get("sampler_epoch") if isinstance(cb[name], dict) else None
            if not isinstance(ea, int) or not isinstance(eb, int) or ea == eb:
                continue
            run = "b" if eb < ea else "a"
            if len((case.run_b if run == "b" else case.run_a).launch) > 1:
                continue
            low, high = min(ea, eb), max(ea, eb)
            return [
                _state_arm(
                    run,
                    "advance-epochs",
                    "cursor-state",
                    f"state:cursor ({name}'s sampler at epoch {low} in run {run.upper()})",
                    f"where step {k + 1} starts, run {run.upper()}'s {name} has its sampler at "
                    f"epoch {low} and the other run's at {high}: run {run.upper()} does not "
                    "advance the epoch its sampler shuffles by",
                    f"epoch|{run}|{name}",
                )
            ]
    return []


def cursor_arms(recs: dict[str, list[BoundaryRecord]], k: int | None) -> list[Arm]:
    """Attributes of a job's data cursor that its state_dict leaves out, and that differ
    between the process that saved at step K and the one that resumed from it: a checkpoint
    loses them (restore-cursors on the resumed run). The place is that state_dict."""
    if k is None:
        return []
    for run in ("b", "a"):
        for rank in sorted({r.rank for r in recs[run]}):
            trip = _round_trip(recs[run], k, rank)
            if trip is None:
                continue
            saved, back = (t.manifest.data_cursor or {} for t in trip)
            for name in sorted(saved):
                if not name.endswith(UNSAVED.format(name="")):
                    continue
                was, now = saved[name], back.get(name) or {}
                lost = [a for a in was if a != "state_dict_at" and was[a] != now.get(a)]
                if not lost:
                    continue
                cls = name.removesuffix(UNSAVED.format(name=""))
                at = was.get("state_dict_at", cls)
                said = ", ".join(f"{a} {was[a]!r} saved, {now.get(a)!r} resumed" for a in lost[:3])
                statement = (
                    f"run {run.upper()}'s data cursor {cls} after step {k}: {said}; its state_dict "
                    f"({at}) leaves {', '.join(lost[:3])} out, so the resume does not bring it back"
                )
                where = f"{at} ({cls}.state_dict leaves out {', '.join(lost[:3])})"
                return [
                    _state_arm(
                        run,
                        "restore-cursors",
                        "cursor-state",
                        where,
                        statement,
                        f"resume-cursor|{run}|{cls}|{','.join(lost)}",
                    )
                ]
    return []


def _at_load(theirs: Any, mine: Any, mine_at_resume: Any) -> Any:
    """The value to put back when the checkpoint is loaded, so that the resumed run holds the
    other run's value where step K+1 starts: a number the resumed process itself moved on the
    way there (a counter a step advances before its first forward) is put back less that
    move; anything else as the other run had it."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (theirs, mine))
    if numbers and isinstance(mine_at_resume, int | float) and not isinstance(mine_at_resume, bool):
        return theirs - (mine - mine_at_resume)
    return theirs


def setting_arms(diffs: list[PointDiff]) -> list[Arm]:
    """Global numeric settings the two runs compute under differently (at initialisation, or
    where step K+1 starts): B given A's value with ``set``, no source edit. A setting that
    chooses a precision is a numerical policy by its values; the others (threads, kernels
    chosen, deterministic algorithms) an environment difference."""
    import ast

    out: list[Arm] = []
    seen: set[str] = set()
    for d in diffs:
        if d.between != "A vs B":
            continue
        for e in d.diff.differences:
            if e.section != "setting" or e.path in seen or not settable(e.path):
                continue
            seen.add(e.path)
            try:
                value = ast.literal_eval(e.a or "")
            except (ValueError, SyntaxError):
                continue
            category = "precision" if e.path in PRECISION_SETTINGS else "environment"
            out.append(
                _state_arm(
                    "b",
                    f"set {e.path}={json.dumps(value)}",
                    category,
                    f"setting:{e.path} (A {e.a}, B {e.b})",
                    f"the runs compute under different {e.path} (A: {e.a}, B: {e.b}, at "
                    f"{d.point}): this setting changes the bits",
                    f"setting|{e.path}|{e.a}|{e.b}",
                )
            )
    return out


# the location setting_arms gives a numeric setting's arm, read back once it is proven
_SETTING = re.compile(r"^setting:(?P<name>\S+) \(A (?P<a>[^,]*), B (?P<b>[^)]*)\)")


def proven_setting(where: str) -> tuple[str, str, str] | None:
    """(name, A's value, B's value) of a proven setting's location, else None."""
    m = _SETTING.match(where)
    return (m["name"], m["a"], m["b"]) if m else None


def seed_arms(case: Case, recs: dict[str, list[BoundaryRecord]]) -> list[Arm]:
    """A line of the job that seeds with another value in each run (a process id, the clock,
    a counter): that line given A's values, in order, in both runs (pin-seed). Only for a run
    of one process per rank: a pin counts the seedings from the start of every process."""
    from .structural import call_site

    seeds: dict[str, list[SeedCall]] = {}
    for run in ("a", "b"):
        mine = [r for r in recs[run] if r.rank == 0]
        if not mine or len({r.pid for r in mine}) != 1:
            return []
        seeds[run] = [s for r in mine for s in r.seeds]
    key_a = [(s.fn, s.caller) for s in seeds["a"]]
    key_b = [(s.fn, s.caller) for s in seeds["b"]]
    sm = difflib.SequenceMatcher(a=key_a, b=key_b, autojunk=False)
    out: list[Arm] = []
    seen: set[str] = set()
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            continue
        for a, b in zip(seeds["a"][i1:i2], seeds["b"][j1:j2], strict=True):
            if a.value == b.value or not a.caller or a.caller in seen:
                continue
            line = a.caller.split(" (", 1)[0]
            values = [s.value for s in seeds["a"] if s.caller == a.caller]
            if not all(re.fullmatch(r"-?\d+", v) for v in values):
                continue  # a state's digest cannot be given back
            site = call_site(line, case.run_b.cwd)
            if site is None:
                continue
            seen.add(a.caller)
            rel = under_run(site.file, case.run_b.cwd)
            where = f"{rel}:{site.line}" + (f" ({site.qualname})" if site.qualname else "")
            # both runs pinned, compared with each other: the value observed came from a
            # launch of its own, and a value a launch makes anew differs in every launch
            out.append(
                _state_arm(
                    "both",
                    f"pin-seed {rel}:{site.line}={','.join(values)}",
                    "seed-value",
                    where,
                    f"{a.fn} at {where} seeds {a.value} in A and {b.value} in B: the value "
                    "seeded there changes the bits",
                    f"seed|{rel}:{site.line}",
                )
            )
    return out[:3]


def draw_arms(case: Case, recs: dict[str, list[BoundaryRecord]], k: int | None) -> list[Arm]:
    """Draws from numpy's or python's global generator that one run makes (or makes more of)
    on the way to a boundary where the other does not: the function around the drawing line
    run under saved-and-restored generator state in that run (isolate-rng). Torch's draws are
    ops, seen by the trace; these are not."""
    from .structural import call_site

    points = ["init"] + ([f"after-{k}", f"step-{k + 1}"] if k is not None else [])
    out: list[Arm] = []
    seen: set[str] = set()
    ranks = sorted({r.rank for r in recs["a"]} & {r.rank for r in recs["b"]})
    for rank in ranks[:1]:
        nxt_a = _pick(recs["a"], points[-1], rank)
        nxt_b = _pick(recs["b"], points[-1], rank)
        for point in points:
            ra = _pick(recs["a"], point, rank, nxt_a.pid if nxt_a else None)
            rb = _pick(recs["b"], point, rank, nxt_b.pid if nxt_b else None)
            if ra is None or rb is None:
                continue
            for key in sorted(set(ra.draws) | set(rb.draws)):
                na, nb = ra.draws.get(key, 0), rb.draws.get(key, 0)
                if na == nb or key in seen:
                    continue
                run = "b" if nb > na else "a"
                fn, _, frame = key.partition(" at ")
                line = frame.split(" (", 1)[0]
                spec = case.run_b if run == "b" else case.run_a
                site = call_site(line, spec.cwd)
                target = site.target if site else None
                if target is None or target.startswith("__main__"):
                    continue
                seen.add(key)
                said = (
                    f"on the way to {point}, run {run.upper()} draws {fn} at {frame} "
                    f"{max(na, nb)} time(s), run {'A' if run == 'b' else 'B'} {min(na, nb)}: "
                    "its draws move a generator that training draws from"
                )
                out.append(
                    _state_arm(
                        run,
                        f"isolate-rng {target}",
                        "extra-call",
                        f"{site.file}:{site.line} ({site.qualname})",
                        said,
                        f"draw|{run}|{target}",
                    )
                )
    return out[:3]


def attr_arms(case: Case, recs: dict[str, list[BoundaryRecord]], k: int | None) -> list[Arm]:
    """Attributes of the job's own objects that their state_dict leaves out and that differ
    between A and B where step K+1 starts, in a run that resumed: the other run's values put
    back after the object's load_state_dict (restore-attrs on the resumed run). Unlike
    restore-cursors, the values are the ones the uninterrupted run had at that boundary,
    whenever in its step the job changed them. The place is where that state_dict returns."""
    if k is None:
        return []
    nxt = f"step-{k + 1}"
    out: list[Arm] = []
    for run, other in (("b", "a"), ("a", "b")):
        spec = case.run_b if run == "b" else case.run_a
        if len(spec.launch) < 2:
            continue  # only a resume loses what a state_dict leaves out
        for rank in sorted({r.rank for r in recs[run]} & {r.rank for r in recs[other]}):
            mine, theirs = _pick(recs[run], nxt, rank), _pick(recs[other], nxt, rank)
            if mine is None or theirs is None:
                continue
            cur_m = mine.manifest.data_cursor or {}
            cur_t = theirs.manifest.data_cursor or {}
            for name in sorted(cur_t):
                if not name.endswith(UNSAVED.format(name="")) or "#" in name:
                    continue
                was, now = cur_t[name], cur_m.get(name) or {}
                lost = [a for a in was if a != "state_dict_at" and a in now and was[a] != now[a]]
                if not lost:
                    continue
                cls = name.removesuffix(UNSAVED.format(name=""))
                at = saved_at(str(was.get("state_dict_at", cls)))
                trip = _round_trip(recs[run], k, rank)
                began = ((trip[1].manifest.data_cursor or {}).get(name) or {}) if trip else {}
                put = {a: _at_load(was[a], now[a], began.get(a)) for a in lost[:4]}
                values = ",".join(f"{cls}.{a}={json.dumps(v)}" for a, v in put.items())
                said = ", ".join(
                    f"{a} {now[a]!r} in {run.upper()}, {was[a]!r} in {other.upper()}"
                    for a in lost[:4]
                )
                statement = (
                    f"where step {k + 1} starts, run {run.upper()}'s {cls} differs from run "
                    f"{other.upper()}'s in attributes its state_dict leaves out ({said}): the "
                    "resume does not bring them back"
                )
                where = f"{at} ({cls}.state_dict leaves out {', '.join(lost[:4])})"
                out.append(
                    _state_arm(
                        run,
                        f"restore-attrs {values}",
                        "cursor-state",
                        where,
                        statement,
                        f"resume-attrs|{run}|{cls}|{','.join(lost)}",
                    )
                )
            if out:
                return out
    return out


def global_arms(case: Case, recs: dict[str, list[BoundaryRecord]], k: int | None) -> list[Arm]:
    """Module-level values of the job's own modules that differ between A and B where step
    K+1 starts, in a run that resumed: state no checkpoint of objects holds (a curriculum's
    progress, a global step a helper reads). The other run's values set where the resumed
    process declares its resume (restore-globals) test it. The place is the job's line that
    left the resumed run's value: a set-up that assigns it again, else its initial value."""
    from ..source_literals import reset_site

    if k is None:
        return []
    nxt = f"step-{k + 1}"
    for run, other in (("b", "a"), ("a", "b")):
        spec = case.run_b if run == "b" else case.run_a
        if len(spec.launch) < 2:
            continue  # a process started afresh loses its globals only on a resume
        for rank in sorted({r.rank for r in recs[run]} & {r.rank for r in recs[other]}):
            mine, theirs = _pick(recs[run], nxt, rank), _pick(recs[other], nxt, rank)
            if mine is None or theirs is None:
                continue
            # compared, and put back, where the resumed process declares its resume: what
            # the job does between there and the step's first forward (a batch drawn with
            # the global's help) does it again from the value put back
            at_m = _pick(recs[run], f"after-{k}", rank, mine.pid)
            at_t = _pick(recs[other], f"after-{k}", rank)
            if at_m is None or at_t is None or at_m.pid != mine.pid:
                continue
            g_m, g_t = at_m.manifest.module_globals, at_t.manifest.module_globals
            s_m, s_t = mine.manifest.module_globals, theirs.manifest.module_globals
            lost = [
                n for n in sorted(g_t) if n in g_m and g_m[n] != g_t[n] and s_m.get(n) != s_t.get(n)
            ]
            if not lost:
                continue
            root = Path(spec.cwd or ".")
            places = []
            for n in lost:
                modname, _, name = n.rpartition(".")
                for f in (
                    root / f"{modname.replace('.', '/')}.py",
                    root / modname.replace(".", "/") / "__init__.py",
                ):
                    if f.is_file() and (at := reset_site(str(f), name, g_m[n])):
                        places.append(f"{os.path.relpath(at, root)}")
                        break
            values = ",".join(f"{n}={json.dumps(g_t[n])}" for n in lost[:4])
            said = ", ".join(
                f"{n} {g_m[n]!r} in {run.upper()}, {g_t[n]!r} in {other.upper()}" for n in lost[:4]
            )
            where = (places[0] + " " if places else "") + (
                f"(module global {', '.join(lost[:4])}, which the checkpoint does not hold)"
            )
            return [
                _state_arm(
                    run,
                    f"restore-globals {values}",
                    "resume-state",
                    where,
                    f"where step {k + 1} starts, run {run.upper()}'s module globals differ from "
                    f"run {other.upper()}'s ({said}): the resume does not bring them back",
                    f"resume-globals|{run}|{','.join(lost)}",
                )
            ]
    return []


def state_step(rep: MismatchReport) -> int | None:
    """K: the state is compared after step K and where step K+1 starts. The step before the
    first differing one, except right after a resume: a metric logged at step N reflects the
    updates before it, so when N is the resumed step's successor the first update that read
    what the resume restored is the resumed step's, and the boundary to read is the resume's."""
    assert rep.step is not None
    first = rep.diff.common_steps[0] if rep.diff.common_steps else 0
    if rep.step <= first:
        return None
    resumes = set(rep.diff.resumes_a) | set(rep.diff.resumes_b)
    if rep.step - 2 in resumes and rep.step - 2 >= first:
        return rep.step - 2
    return rep.step - 1


def boundary_arms(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
    supported: list[Hypothesis] | None = None,
    meanwhile: Meanwhile | None = None,
) -> list[Arm]:
    """Capture, diff and record both runs' state at the boundaries; the arms it proposes.

    ``supported``: stage 1's supported hypotheses, which say what reruns to start early.
    ``meanwhile``: stage 1 itself, run in this thread while the relaunches run (it does not
    depend on them, and a launch is mostly waiting); what it returns replaces ``supported``.
    It runs exactly once, also when the state is already in the ledger.
    """
    assert rep.step is not None
    mark = done_for(ledger.state(), "state", rep.step)
    done = mark.get("result") if mark is not None else None
    if done or time.monotonic() >= deadline:
        if meanwhile is not None:
            meanwhile()
        return BoundaryState.model_validate(done).arms if done else []
    k = state_step(rep)
    on_status(
        "state manifests of both runs after initialisation"
        + (f" and around step {k}" if k is not None else "")
    )
    got = _from_baselines(case, Path(ledger.workspace), k)
    relaunched = got is None
    if got is None:
        got = _capture(case, ledger, k, rep.step, timeout_s, on_status, supported or [], meanwhile)
    else:
        on_status("read from the baselines, which captured it as they ran")
    outs = {run: o for run, (o, _) in got.items()}
    recs = {run: r for run, (_, r) in got.items()}
    result = BoundaryState(after_step=k)
    if not recs["a"] or not recs["b"]:
        failed = [o.error for o in outs.values() if o.error]
        ledger.note(
            "no state manifests to compare: "
            + ("; ".join(failed) if failed else "a run wrote none (no forward with grad enabled)"),
            level="warning",
        )
        ledger.stage("state", "done", step=rep.step, result=result.model_dump(mode="json"))
        return []
    result.diffs = compare_records(recs, k)
    if k is not None:
        result.arms, result.said = writer_arms(case, recs, k, result.diffs, outs)
    result.arms = setting_arms(result.diffs) + result.arms
    result.arms += rng_arms(result.diffs, recs) + scheduler_arms(case, result.diffs)
    result.arms += cursor_arms(recs, k)
    result.arms += epoch_arms(case, recs, k)
    result.arms += part_arms(case, result.diffs)
    result.arms += structure_arms(result.diffs, recs, k)
    result.arms += membership_arms(result.diffs)
    result.arms += repeat_arms(result.diffs)
    result.arms += tie_arms(recs)
    result.arms += hook_arms(result.diffs)
    result.arms += scaler_arms(recs)
    result.arms += later_state_arms(result.diffs)
    result.arms += attr_arms(case, recs, k)
    result.arms += global_arms(case, recs, k)
    result.arms += draw_arms(case, recs, k)
    result.arms += seed_arms(case, recs)
    for a in result.arms:
        if a.hypothesis.id not in ledger.state().hypotheses:
            ledger.put_hypothesis(a.hypothesis)
    lines = [s for d in result.diffs for s in d.sentences()]
    compared = ", ".join(f"{d.point} ({d.between}, rank {d.rank})" for d in result.diffs)
    summary = (
        f"state manifests compared at {compared or 'no common point'}: "
        + ("; ".join(lines[:MAX_SAID]) if lines else "every entry equal")
        + (
            f"; {len(lines) - MAX_SAID} more differences in the data"
            if len(lines) > MAX_SAID
            else ""
        )
    )
    ev = ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.manifest,
            result=EvidenceResult.observed,
            summary=summary,
            hypotheses=[a.hypothesis.id for a in result.arms],
            data=ManifestData(
                after_step=k,
                differences=lines,
                diffs=[d.model_dump(mode="json") for d in result.diffs],
                writes={
                    run: [w.model_dump() for r in rs for w in r.writes] for run, rs in recs.items()
                },
                records={run: o.out_dir for run, o in outs.items()},
            ),
        )
    )
    result.evidence = ev.id
    for line in result.said[:5]:
        ledger.note(f"state writer not testable: {line}")
    ledger.stage("state", "done", step=rep.step, result=result.model_dump(mode="json"))
    if meanwhile is not None and not relaunched:
        _beside_first_arm(
            case, Path(ledger.workspace), result.arms, meanwhile, timeout_s, on_status
        )
    return result.arms
