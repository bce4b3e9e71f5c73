"""What the workflow holds at any moment: the typed situation its proposers read.

The ledger holds what was recorded (hypotheses, evidence, refutations and failed launches
included); the situation adds what this process observed and keeps in memory (the mismatch
report, the baselines, the declared differences, the state observation's arms, the trace),
and answers the questions every proposer asks: was this tested, how, what is proven. It
decides nothing: the proposers propose, the chooser picks.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ledger import Ledger, LedgerState
from ..records import Case, Evidence, EvidenceKind, EvidenceResult, Hypothesis, HypothesisStatus
from ..runs import OUT_TOKEN
from .arms import Arm, prior_rerun
from .characterize import MismatchReport
from .declared import DeclaredDifference
from .options import RunOptions

if TYPE_CHECKING:
    from .stage2 import Stage2Result

DEFAULT_LAUNCH_S = 20.0


def relaunchable(case: Case) -> bool:
    return all(r.launch and r.metrics and OUT_TOKEN in r.metrics for r in (case.run_a, case.run_b))


def programs(case: Case, run: str) -> list[str]:
    """The programs a run launches: each command's script (its first ``.py`` argument, past
    any launcher such as ``torchrun`` or ``-m torch.distributed.run``), else the module it
    runs (``-m NAME``), in order."""
    spec = case.run_a if run == "a" else case.run_b
    out: list[str] = []
    for argv in spec.launch:
        script = next((a for a in argv if a.endswith(".py")), None)
        module = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-m"), None)
        if script or module:
            out.append(script or "-m " + module)
    return out


def same_program(case: Case) -> bool:
    """Whether the two runs launch the same programs (a flag, a variable, a config or a
    library between them), not two stacks' own scripts (Megatron's against DeepSpeed's):
    only then is a call one run makes and the other does not a difference between them."""
    return set(programs(case, "a")) == set(programs(case, "b"))


class Situation:
    """The workflow's situation: the ledger's folded state plus this process's observations."""

    def __init__(
        self,
        case: Case,
        ledger: Ledger,
        rep: MismatchReport,
        opts: RunOptions,
        deadline: float,
        *,
        baselines: tuple[Path | None, Path | None],
        declared: list[DeclaredDifference],
        launch_s: float | None = None,
    ) -> None:
        self.case = case
        self.ledger = ledger
        self.rep = rep
        self.opts = opts
        self.deadline = deadline
        self.ma, self.mb = baselines
        self.declared = declared
        self.launch_s = launch_s or DEFAULT_LAUNCH_S
        self.relaunch = relaunchable(case) and self.ma is not None
        self.state_arms: list[Arm] | None = None  # None: the state was not observed
        self.state_in_baselines = False  # the baselines captured it as they ran
        self.trace: Stage2Result | None = None
        self.traced = False  # tracing was attempted (it may have concluded nothing)
        self.trace_arms: list[Arm] = []
        self.held_arms: list[Arm] = []  # trace arms in code two source trees share, held
        self.bisected = False
        self.bisect_found: Hypothesis | None = None
        # the baselines' corresponding-boundary captures (two frameworks), when they wrote them
        self.boundaries: tuple[Path, Path] | None = None
        self.corresponded = False
        self.correspond_arms: list[Arm] = []
        self.correspond_relevant: set[str] = set()  # arms the diagnosis's words point at
        self.read: set[str] = set()  # proven settings already read further
        self._selected: tuple[str | None, tuple[Path, Path] | None] = (None, None)
        self.where: dict[str, str] = {}  # hypothesis id -> the location its arm names
        self.done: set[str] = set()  # moves made in this process, by key

    # -- the ledger, read -----------------------------------------------------------------
    def state(self) -> LedgerState:
        return self.ledger.state()

    def time_left(self) -> bool:
        return time.monotonic() < self.deadline

    def scanned(self) -> bool:
        step = self.rep.step
        return any(
            s.get("stage") == "scan" and s.get("status") == "done" and s.get("step") == step
            for s in self.state().stages
        )

    def supported(self) -> list[Hypothesis]:
        return [
            h for h in self.state().hypotheses.values() if h.status == HypothesisStatus.supported
        ]

    def proven(self) -> list[Hypothesis]:
        """Supported hypotheses whose intervention made every step match."""
        return [h for h in self.supported() if self.validated(h.id) is not None]

    def validated(self, hyp_id: str) -> Evidence | None:
        prior = prior_rerun(self.ledger, hyp_id)
        return prior if prior is not None and prior.result == EvidenceResult.supported else None

    def attempts(self, hyp_id: str) -> list[Evidence]:
        """Every rerun that tested this hypothesis, failed launches included."""
        return [e for e in self.state().evidence_for(hyp_id) if e.kind == EvidenceKind.rerun]

    def tried(self, arm: Arm) -> Evidence | None:
        """The rerun of exactly this arm (its interventions, on its run), if one was made."""
        want = [arm.intervention, *arm.also]
        names = {"a": self.case.run_a.name, "b": self.case.run_b.name, "both": "both"}
        for e in reversed(self.attempts(arm.hypothesis.id)):
            data = _data(e)
            if data.get("interventions") == want and data.get("applied_to") in (
                names.get(arm.run),
                None,
            ):
                return e
        return None

    def failed_to_launch(self, arm: Arm) -> bool:
        ev = self.tried(arm)
        return ev is not None and ev.result == EvidenceResult.error

    def refuted(self, policy: str) -> Evidence | None:
        """A rerun under this one intervention alone that left a step differing."""
        for e in self.state().evidence:
            data = _data(e)
            if (
                e.kind == EvidenceKind.rerun
                and e.result == EvidenceResult.refuted
                and data.get("interventions") == [policy]
            ):
                return e
        return None

    def resumed_runs(self) -> list[str]:
        """The runs whose launch is several commands (a save, then a resume)."""
        return [
            r
            for r, spec in (("a", self.case.run_a), ("b", self.case.run_b))
            if len(spec.launch) > 1
        ]

    def observing_left(self) -> bool:
        """An observation that could still point somewhere is not yet made."""
        if not self.scanned():
            return True
        if self.relaunch and self.state_arms is None:
            return True
        return relaunchable(self.case) and not self.traced and self.trace_wanted()

    def explained(self) -> set[str]:
        """Hypotheses the trace's origin is explained by (its own included)."""
        t = self.trace
        if t is None or t.origin is None:
            return set()
        return {*t.explains, *([t.origin_hypothesis] if t.origin_hypothesis else [])}

    def has_candidate(self) -> bool:
        """Some supported hypothesis may carry the verdict: proven by a rerun, or explaining
        the trace origin, or (no origin traced) supported at all."""
        supported = self.supported()
        if self.proven():
            return True
        if self.trace is not None and self.trace.origin is not None:
            return any(h.id in self.explained() for h in supported)
        return bool(supported)

    def selected_files(self) -> tuple[Path, Path] | None:
        """The one file of the job's own each run alone calls into, read once per trace
        (:func:`.tree_narrowing.selected_files`)."""
        from ..evidence_data import TraceCompareData
        from .tree_narrowing import selected_files

        t = self.trace
        if t is None:
            return None
        if self._selected[0] != t.evidence.id:
            try:
                dirs = t.evidence.data_as(TraceCompareData).trace_dirs
            except TypeError:
                dirs = {}
            pair = selected_files(self.case, dirs) if dirs.get("a") and dirs.get("b") else None
            self._selected = (t.evidence.id, pair)
        return self._selected[1]

    def trace_wanted(self) -> bool:
        return not self.supported() or self.opts.confirm_trace


def _data(e: Evidence) -> dict[str, Any]:
    d = e.data
    if d is None:
        return {}
    return d if isinstance(d, dict) else d.model_dump()
