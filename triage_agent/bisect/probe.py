"""The predicate of every search: run B in one tree, uninstrumented, and compare it with A.

A probe builds its tree in a throwaway worktree (:mod:`.worktree`), reruns run B there
through :func:`triage_agent.interventions.rerun` (the worktree as B's source directory, or
first on ``PYTHONPATH`` for a package B imports) and compares it with run A's baseline bit
for bit over every step and rank (:func:`triage_agent.interventions.compare_runs`):

- good: every step of every rank matches;
- bad: a step differs, or B runs to the end with steps or ranks A has missing;
- skip: B does not run there (an import error, a crash before the first step, a crash or
  timeout before any differing step), or the tree cannot be built. Never bad.

Every probe is evidence in the ledger (kind ``rerun``; ``note`` when nothing was launched
because the tree could not be built), its data holding ``bisect.probe``: the key of its
tree and the case's runs. A probe whose key the ledger holds is read back, never rerun,
so a bisection stopped by Ctrl-C or its budget resumes where it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError, TriageError
from ..evidence_data import BisectData, NoteData, RerunData
from ..interventions import EnvIntervention, compare_runs, rerun
from ..ledger import Ledger
from ..metrics import diff_metrics, load_metrics
from ..records import Case, Evidence, EvidenceKind, EvidenceResult
from ..runs import RunOutcome, materialize, rerun_evidence
from .model import BisectProgress, CommitInfo, Mode, Outcome, Phase, ProbeResult, TreeSpec
from .package import EXTENSIONS_VAR, extensions_dir
from .worktree import Patches, TreeNotBuilt, built


class BudgetSpent(TriageError):
    """The bisection's budget ran out before a probe that would need a launch."""


def _partial(base: RunOutcome, out: RunOutcome) -> tuple[Outcome, str, int | None]:
    """A run that failed: bad only if a step it did log already differs; else a skip."""
    try:
        d = diff_metrics(load_metrics(base.metrics or ""), load_metrics(out.metrics or ""))
    except (InputError, OSError):
        return "skip", f"B does not run here: {out.error}", None
    if d.first_step is not None:
        return "bad", f"first differing step {d.first_step} (then: {out.error})", d.first_step
    return "skip", f"B does not run here: {out.error}", None


def classify(case: Case, base: RunOutcome, out: RunOutcome) -> tuple[Outcome, str, int | None]:
    if not out.ok:
        return _partial(base, out)
    m = compare_runs(case, base, out)
    if m.all_match:
        return "good", m.said(), None
    said = m.said() if m.first_differing_step is not None else f"not a match: {m.note}"
    return "bad", said, m.first_differing_step


class Prober:
    """Evaluates trees against A, memoised by the ledger; counts what it launched."""

    def __init__(
        self,
        case: Case,
        ledger: Ledger,
        repo,
        *,
        mode: Mode,
        commits: dict[str, CommitInfo],
        patches: Patches,
        timeout_s: float,
        deadline: float | None,
        progress: Callable[[BisectProgress], None] | None,
    ) -> None:
        self.case, self.ledger, self.repo, self.mode = case, ledger, repo, mode
        self.commits, self.patches = commits, patches
        self.timeout_s, self.deadline = timeout_s, deadline
        self.progress = progress or (lambda _p: None)
        self.ws = Path(ledger.workspace)
        runs = json.dumps(
            [case.run_a.model_dump(mode="json"), case.run_b.model_dump(mode="json"), mode],
            sort_keys=True,
        )
        self.salt = hashlib.sha256(runs.encode()).hexdigest()
        self.probes: list[ProbeResult] = []
        self.launched = 0
        self.reused = 0
        self.cached = 0
        self.launch_seconds: list[float] = []
        self.left: int | None = None
        self.commits_left: int | None = None
        self.phase: Phase = "bisect"
        self._base: RunOutcome | None = None
        # the commit run B's own baseline runs as it is (a clean checkout or a named
        # package at that revision): its probe is that baseline, not another launch
        self.baseline_tree: str | None = None
        self._memo = self._recorded()

    def _recorded(self) -> dict[str, ProbeResult]:
        memo: dict[str, ProbeResult] = {}
        for ev in self.ledger.state().evidence:
            rec = ev.data.bisect if isinstance(ev.data, RerunData | NoteData) else None
            if rec is not None:
                try:
                    memo[rec.probe] = ProbeResult.model_validate(
                        {**rec.result, "evidence_id": ev.id, "launched": False}
                    )
                except (KeyError, TypeError, ValueError):
                    continue  # a record of another shape: probed again, never trusted
        return memo

    # -- what a person reads -------------------------------------------------------------------
    def name(self, sha: str) -> str:
        c = self.commits.get(sha)
        return c.said() if c else sha[:10]

    def said_tree(self, tree: TreeSpec) -> str:
        text = f"B at {self.name(tree.base)}"
        if tree.merge:
            text += f" with {self.name(tree.merge)} merged in"
        if tree.revert_commits:
            text += ", reverted: " + ", ".join(self.name(c) for c in tree.revert_commits)
        if tree.revert_hunks:
            where = [self.hunk_place(h) for h in tree.revert_hunks]
            text += f", {len(where)} hunk(s) reverted ({', '.join(where[:6])})"
        return text

    def hunk_place(self, hid: str) -> str:
        h = self.patches.find(hid)
        return f"{h.file}:{h.line}@{h.commit[:10]}" if h else hid

    def report(self, message: str) -> None:
        mean = sum(self.launch_seconds) / len(self.launch_seconds) if self.launch_seconds else None
        eta = mean * self.left if mean is not None and self.left is not None else None
        self.progress(
            BisectProgress(
                phase=self.phase,
                done=len(self.probes),
                left=self.left,
                commits_left=self.commits_left if self.phase in ("bisect", "commits") else None,
                eta_s=eta,
                message=message,
            )
        )

    # -- the predicate ---------------------------------------------------------------------
    def __call__(self, tree: TreeSpec, *, hypotheses: list[str] | None = None) -> ProbeResult:
        hyps = list(hypotheses or [])
        key = tree.key(self.salt + "|" + ",".join(hyps))
        asked = next((q for q in self.probes if q.key == key), None)
        if asked is not None:  # the same tree asked again in this call: one probe, counted once
            return asked
        if key in self._memo:
            got = self._memo[key].model_copy(update={"launched": False})
            self.probes.append(got)
            self.reused += 1
            self.report(f"{self.said_tree(tree)}: {got.outcome} (from the ledger)")
            return got
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetSpent(f"budget reached before probing {self.said_tree(tree)}")
        self.report(f"probing {self.said_tree(tree)}")
        got = self._probe(tree, key, hyps)
        self._memo[key] = got
        self.probes.append(got)
        self.report(f"{self.said_tree(tree)}: {got.outcome} ({got.said})")
        return got

    def baseline(self) -> RunOutcome:
        if self._base is None:
            base = materialize(self.case.run_a, self.ws, "baseline", timeout_s=self.case.timeout_s)
            if not base.ok:
                raise InputError(f"run A's baseline failed, nothing to compare with: {base.error}")
            self._base = base
        return self._base

    def _probe(self, tree: TreeSpec, key: str, hyps: list[str]) -> ProbeResult:
        base = self.baseline()
        said_tree = self.said_tree(tree)
        try:
            if self.baseline_tree is not None and tree == TreeSpec(base=self.baseline_tree):
                said_tree += " (run B's own baseline: the same committed tree)"
                out = materialize(
                    self.case.run_b, self.ws, "baseline", timeout_s=self.case.timeout_s
                )
            else:
                with built(self.repo, tree, key, self.patches) as path:
                    out = self._rerun(path)
        except (TreeNotBuilt, InputError) as exc:
            return self._record_unbuilt(tree, key, said_tree, str(exc))
        outcome, said, first = classify(self.case, base, out)
        if out.cached:
            self.cached += 1
        else:
            self.launched += 1
            self.launch_seconds.append(out.seconds)
        if outcome == "skip":
            result = EvidenceResult.error
        elif hyps:
            result = EvidenceResult.supported if outcome == "good" else EvidenceResult.refuted
        else:
            result = EvidenceResult.observed
        probe = ProbeResult(
            key=key,
            phase=self.phase,
            tree=tree,
            outcome=outcome,
            said=said,
            first_differing_step=first,
            evidence_id="",
            launched=not out.cached,
            seconds=out.seconds,
        )
        m = compare_runs(self.case, base, out) if out.ok else None
        data = RerunData(
            applied_to=self.case.run_b.name,
            compared_with=self.case.run_a.name,
            changed=said_tree,
            source_dir=None,  # a throwaway worktree, removed after the rerun
            match=m.model_dump(mode="json") if m else None,
            first_step=first,
            common_steps=m.steps if m else None,
            error=out.error,
            bisect=self._bisect_data(key, probe),
        )
        summary = (
            f"bisect {self.phase}: {said_tree}, uninstrumented, against run A's "
            f"baseline: {said} -> {outcome}"
        )
        ev = self.ledger.add_evidence(
            rerun_evidence(out, data, hypotheses=hyps, result=result, summary=summary)
        )
        return probe.model_copy(update={"evidence_id": ev.id})

    def _rerun(self, path: Path) -> RunOutcome:
        if self.mode == "source-dir":
            return rerun(
                self.case, "b", [], workspace=self.ws, timeout_s=self.timeout_s, source_dir=path
            )
        old = self.case.run_b.env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        ivs = [
            EnvIntervention(key="PYTHONPATH", value=str(path) + (os.pathsep + old if old else ""))
        ]
        if (ext := extensions_dir(path)) is not None:
            ivs.append(EnvIntervention(key=EXTENSIONS_VAR, value=ext))
        return rerun(self.case, "b", ivs, workspace=self.ws, timeout_s=self.timeout_s)

    def _bisect_data(self, key: str, probe: ProbeResult) -> BisectData:
        return BisectData(
            probe=key,
            result=probe.model_dump(mode="json", exclude={"evidence_id", "launched"}),
        )

    def _record_unbuilt(self, tree: TreeSpec, key: str, said_tree: str, why: str) -> ProbeResult:
        probe = ProbeResult(
            key=key,
            phase=self.phase,
            tree=tree,
            outcome="skip",
            said=f"not run: {why}",
            evidence_id="",
            launched=False,
        )
        ev = self.ledger.add_evidence(
            Evidence(
                kind=EvidenceKind.note,
                result=EvidenceResult.inconclusive,
                summary=f"bisect {self.phase}: {said_tree} cannot be run: {why} -> skip",
                data=NoteData(changed=said_tree, bisect=self._bisect_data(key, probe)),
            )
        )
        return probe.model_copy(update={"evidence_id": ev.id})
