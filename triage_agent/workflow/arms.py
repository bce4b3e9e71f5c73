"""Testing a hypothesis by an intervention: one thing changed in one run, an uninstrumented
rerun compared with the other run over every step and rank.

An arm is a hypothesis and the intervention that tests it. It is supported only when the
rerun makes every step match (``compare_runs``' ``all_match``), refuted when a step still
differs, and otherwise left as it was (a rerun that failed or stopped short proves
nothing). Arms already run keep their evidence: a resumed workflow does not rerun them.
"""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import InputError
from ..interventions import (
    IsolateRngIntervention,
    IsolateWritesIntervention,
    SuppressIntervention,
    intervene,
    parse_intervention,
)
from ..ledger import Ledger
from ..ledger_rules import BY_LATEST_TEST
from ..policies import CALLED_FROM, RESTORED, WROTE_AT
from ..records import Case, Evidence, EvidenceKind, EvidenceResult, Hypothesis, HypothesisStatus


class Arm(BaseModel):
    hypothesis: Hypothesis
    intervention: str
    also: list[str] = Field(
        default_factory=list,
        description="interventions applied in the same rerun (differences that launch only "
        "together)",
    )
    run: str = Field(default="b", description="a, b, or both (the same change in each run)")
    kind: str = Field(description="what proposed it: env, flag, config-key, extra-call")
    location: str = Field(description="what a verdict names as the cause's location")


def prior_rerun(ledger: Ledger, hyp_id: str) -> Evidence | None:
    """The last rerun that tested this hypothesis and did not fail."""
    done = [
        e
        for e in ledger.state().evidence_for(hyp_id)
        if e.kind == EvidenceKind.rerun and e.result != EvidenceResult.error
    ]
    return done[-1] if done else None


def try_arm(
    case: Case,
    ledger: Ledger,
    arm: Arm,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Evidence | None:
    """Record the arm's hypothesis, run its intervention (once), set its status."""
    st = ledger.state()
    hyp = st.hypotheses.get(arm.hypothesis.id) or ledger.put_hypothesis(arm.hypothesis)
    ev = prior_rerun(ledger, hyp.id)
    if ev is None:
        try:
            ivs = [parse_intervention(t) for t in (arm.intervention, *arm.also)]
            said = " + ".join((arm.intervention, *arm.also))
            on = "both runs" if arm.run == "both" else arm.run.upper()
            on_status(f"{said} on {on}, uninstrumented")
            res = intervene(
                case,
                arm.run,
                ivs,
                ledger=ledger,
                hypotheses=[hyp.id],
                timeout_s=timeout_s,
                progress=on_status,
            )
        except InputError as exc:
            ledger.note(f"{hyp.id}: '{arm.intervention}' cannot be applied: {exc}", level="warning")
            return None
        ev = next(e for e in ledger.state().evidence if e.id == res.evidence_id)
        arm.location = _placed(arm, res.outcome.patches)
        arm.location = (
            _restored(arm, res.outcome.out_dir)
            or _recomputed(arm, res.outcome.out_dir)
            or (
                _parts_restored(arm, res.outcome.out_dir)
                if arm.intervention.startswith("restore-state ")
                else None
            )
            or arm.location
        )
    if hyp.status == HypothesisStatus.open and ev.result in (
        EvidenceResult.supported,
        EvidenceResult.refuted,
    ):
        ledger.update_hypothesis(
            hyp.id,
            status=HypothesisStatus(ev.result.value),
            evidence=[ev.id],
            reason=BY_LATEST_TEST,
        )
    return ev


def _placed(arm: Arm, patches: dict[str, dict[str, int]]) -> str:
    """A suppression scoped to initialisation reports the frame of the call it dropped: the
    line that made the extra call, a more exact place than the function it entered. An
    isolation of a function's writes that had to give a module its mode back names the line
    inside the function that set it."""
    iv = parse_intervention(arm.intervention)
    target = getattr(iv, "target", "")
    if isinstance(iv, IsolateWritesIntervention):
        wrote = {
            e.removeprefix(WROTE_AT) for e in patches.get(target, {}) if e.startswith(WROTE_AT)
        }
        if len(wrote) == 1:
            # the write it undid that the job made there: a module's mode left changed
            return (
                f"{_short(wrote.pop())} (sets the mode of modules the call is handed and "
                f"leaves it changed), in {arm.location}"
            )
    init = isinstance(iv, SuppressIntervention) and iv.scope == "init"
    ctor = isinstance(iv, SuppressIntervention | IsolateRngIntervention | IsolateWritesIntervention)
    ctor = ctor and target.endswith(".__init__")
    if not (init or ctor):
        return arm.location
    sites = [
        e.removeprefix(CALLED_FROM) for e in patches.get(target, {}) if e.startswith(CALLED_FROM)
    ]
    if len(sites) != 1:
        return arm.location  # none, or several processes disagreeing: keep the function
    if init:
        return f"{sites[0]}, the call during initialisation into {arm.location}"
    cls = target.rsplit(":", 1)[-1].removesuffix(".__init__")
    return f"{sites[0]}, which constructs {cls}: {arm.location}"


def saved_at(state_dict_at: str) -> str:
    """Where a state_dict builds what it saves: its last ``return`` (else its ``def``)."""
    file, _, line = state_dict_at.rpartition(":")
    try:
        tree = ast.parse(Path(file).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return state_dict_at
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and str(node.lineno) == line:
            returns = [n.lineno for n in ast.walk(node) if isinstance(n, ast.Return)]
            return f"{file}:{max(returns)}" if returns else state_dict_at
    return state_dict_at


def _parts_restored(arm: Arm, out_dir: str) -> str | None:
    """What restore-state put back in the resumed process, and the job's line that last
    loaded each part there: the restore the resume got wrong."""
    from ..restore_state import REPORT

    said: dict[str, dict] = {}
    for f in sorted(Path(out_dir).glob(f"**/{REPORT}")):
        try:
            said.update(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    parts = []
    stale_parts: dict[str, list[str]] = {}
    for name, v in sorted(said.items()):
        if isinstance(v, dict) and (stale := v.get("stale")) and stale.get("inside_at"):
            # written inside the step the resume declares ended: what that step changed
            # after the save is not in the file
            said_once = (
                f"{_short(stale['inside_at'])} (writes the checkpoint inside step "
                f"{stale['resumed_from']}, after its update and before the step ends: the "
                f"resume from step {stale['resumed_from']} reads state the step went on to "
                "change after the save"
            )
            stale_parts.setdefault(said_once, []).append(f"{name}: {v.get('what', '')}")
    if stale_parts:
        # every part came from that file: where each was then loaded follows from it
        return "; ".join(f"{head}; {'; '.join(what)})" for head, what in stale_parts.items())
    for name, v in sorted(said.items()):
        if isinstance(v, dict) and (stale := v.get("stale")) and stale.get("named_at"):
            # the file the resume read holds an earlier step's state: no save after the step
            # the resume declares wrote another file, because the name does not tell them apart
            said_once = (
                f"{_short(stale['named_at'])} (names the checkpoint file {stale['file']}: the "
                f"resume from step {stale['resumed_from']} reads the file written after step "
                f"{stale['written_after']}, at {_short(stale.get('read_at') or '?')}"
            )
            stale_parts.setdefault(said_once, []).append(f"{name}: {v.get('what', '')}")
    parts += [f"{head}; {'; '.join(what)})" for head, what in stale_parts.items()]
    for name, v in sorted(said.items()):
        stale = (v.get("stale") or {}) if isinstance(v, dict) else {}
        if not isinstance(v, dict) or stale.get("named_at") or stale.get("inside_at"):
            continue
        if v.get("built_at"):
            # the checkpoint holds a later step's state: the place is where it took it
            parts.append(f"{_short(v['built_at'])} ({v.get('verb')}: {v.get('what', '')})")
        elif v.get("loaded_at") and v.get("written_at"):
            # a round trip that changes it: the write and the load are both its place
            parts.append(
                f"{_short(v['written_at'])} (writes the checkpoint) and "
                f"{_short(v['loaded_at'])} (loads {name}: {v.get('what', '')})"
            )
        elif v.get("loaded_at"):
            verb = v.get("verb") or f"loads {name}"
            parts.append(f"{_short(v['loaded_at'])} ({verb}: {v.get('what', '')})")
        elif v.get("written_at") and v.get("listed_at"):
            # a part no load touches: the list of what the checkpoint holds leaves it out
            parts.append(
                f"{_short(v['listed_at'])} (lists what the checkpoint holds: "
                f"{', '.join(v.get('keys') or [])}; written at {_short(v['written_at'])} "
                f"without {name}: {v.get('what', '')})"
            )
        elif v.get("written_at"):
            # a part no load touches (gradients): the checkpoint written without it
            parts.append(
                f"{_short(v['written_at'])} (writes the checkpoint, which leaves out "
                f"{name}: {v.get('what', '')})"
            )
    return "; ".join(parts[:2]) or None


def _short(where: str) -> str:
    file, _, line = where.rpartition(":")
    root = str(Path.cwd()).rstrip("/") + "/"
    return (file[len(root) :] if file.startswith(root) else file) + ":" + line


def _recomputed(arm: Arm, out_dir: str) -> str | None:
    """What recompute-state found differing between a checkpointed block's forward and its
    recomputation, or what rebind-optimizer gave back to the optimizer, at the job's line
    that made it differ. None for another arm."""
    from ..amp_order import REPORT as UNSCALED
    from ..grad_sync import REPORT as SYNCED
    from ..observed_hooks import REPORT as OBSERVED
    from ..optimizer_membership import REPORT as REBOUND
    from ..param_ties import REPORT as TIED
    from ..recompute_state import REPORT as RECOMPUTED
    from ..returned_tensors import REPORT as COPIED
    from ..sampler_epochs import REPORT as ADVANCED
    from ..saved_tensors import REPORT as KEPT
    from ..unique_params import REPORT as UNIQUE

    reports = {
        "recompute-state": RECOMPUTED,
        "rebind-optimizer": REBOUND,
        "keep-saved": KEPT,
        "unique-params": UNIQUE,
        "observe-hooks": OBSERVED,
        "advance-epochs": ADVANCED,
        "unscale-first": UNSCALED,
        "copy-returns": COPIED,
        "tie-params": TIED,
    }
    key = arm.intervention.split(" ", 1)[0]
    if key == "sync-grads":
        reports[key] = SYNCED
    if key not in reports:
        return None
    RECOMPUTED = reports[key]  # noqa: N806 - the report this arm's policy writes
    said: dict[str, dict] = {}
    for f in sorted(Path(out_dir).glob(f"**/{RECOMPUTED}")):
        try:
            said.update(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    parts = [
        f"{_short(v['at'])} ({v.get('verb', name)})"
        for name, v in sorted(said.items())
        if isinstance(v, dict) and v.get("at")
    ]
    return "; ".join(dict.fromkeys(parts[:2])) or None


def _restored(arm: Arm, out_dir: str) -> str | None:
    """What restore-cursors put back in the resumed process (its report beside the carried
    snapshot): the objects, the attributes their state_dict leaves out, and where that
    state_dict returns. None for another arm, or when nothing was put back."""
    if arm.intervention != "restore-cursors" or not arm.location.startswith("state:"):
        return None
    said: dict[str, dict] = {}
    for f in sorted(Path(out_dir).glob(f"**/*{RESTORED}")):
        try:
            said.update(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    parts = [
        f"{saved_at(v['at'])} ({name}.state_dict leaves out {', '.join(v['attrs'][:4])})"
        for name, v in sorted(said.items())
        if isinstance(v, dict) and v.get("at") and v.get("attrs")
    ]
    return "; ".join(parts[:2]) or None


def first_supported(
    case: Case,
    ledger: Ledger,
    arms: list[Arm],
    *,
    timeout_s: float,
    deadline: float,
    what: str,
    on_status: Callable[[str], None] = lambda s: None,
) -> Hypothesis | None:
    """Test arms in their (ranked) order until one makes every step match, within budget."""
    for k, arm in enumerate(arms):
        if time.monotonic() >= deadline:
            left = ", ".join(a.intervention for a in arms[k:])
            ledger.note(
                f"budget reached: {what} left untested ({left}); `triage run --budget-minutes M` "
                "resumes with more time",
                level="warning",
            )
            return None
        ev = try_arm(case, ledger, arm, timeout_s=timeout_s, on_status=on_status)
        if ev is not None and ev.result == EvidenceResult.supported:
            return ledger.state().hypotheses[arm.hypothesis.id]
    return None
