"""Renderings of the ledger state that do not need the terminal: rows and Markdown.

What a person reads is said in sentences and tables, never as a dumped record: the
verdict's next action, what the verdict rests on (an intervention that made every step
match, or a reproducer alone), and one discriminator table of the interventions tried.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from .evidence_data import RerunData
from .ledger import LedgerState
from .records import Evidence, EvidenceKind, EvidenceResult


class HypothesisRow(BaseModel):
    id: str
    statement: str
    category: str
    status: str
    classification: str
    evidence: int
    supported: int = Field(description="pieces of evidence about it whose result is supported")
    refuted: int = Field(description="... whose result is refuted")
    not_applicable: int = Field(
        description="... from a test that ran but does not act on the job (neither way)"
    )
    status_reason: str = Field(
        default="", description="why its status was set against evidence that says otherwise"
    )
    verdict: bool

    @property
    def evidence_split(self) -> str:
        """The evidence count with what it says: '3 (1 supported, 1 refuted, 1 n/a)'."""
        parts = [
            f"{n} {word}"
            for n, word in (
                (self.supported, "supported"),
                (self.refuted, "refuted"),
                (self.not_applicable, "n/a"),
            )
            if n
        ]
        return f"{self.evidence} ({', '.join(parts)})" if parts else str(self.evidence)


def results_count(evidence: list[Evidence]) -> dict[str, int]:
    """How many pieces of evidence say each result, every result named (zeros included)."""
    out = {r.value: 0 for r in EvidenceResult}
    for e in evidence:
        out[e.result.value] += 1
    return out


def hypothesis_rows(state: LedgerState) -> list[HypothesisRow]:
    verdict_h = state.verdict.hypothesis if state.verdict else None
    rows = []
    for h in state.hypotheses.values():
        about = state.evidence_for(h.id)
        n = results_count(about)
        rows.append(
            HypothesisRow(
                id=h.id,
                statement=h.statement,
                category=h.category,
                status=h.status.value,
                classification=h.classification.value,
                evidence=len(about),
                supported=n[EvidenceResult.supported.value],
                refuted=n[EvidenceResult.refuted.value],
                not_applicable=n[EvidenceResult.not_applicable.value],
                status_reason=h.status_reason,
                verdict=h.id == verdict_h,
            )
        )
    return rows


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def action_text(text: str) -> str:
    """A verdict's next action as sentences. Older ledgers hold the comparator's advice as a
    JSON object ({"steps": ..., "level": ...}); it is said as the sentences it holds."""
    s = (text or "").strip()
    if s.startswith("{"):
        try:
            d = json.loads(s)
        except ValueError:
            return text
        if isinstance(d, dict):
            return " ".join(_sentence(str(v)) for v in d.values() if v)
    return text


class DiscriminatorRow(BaseModel):
    """One intervention: what was changed, in which run, and what the bits then did."""

    evidence: str
    arm: str
    changed: str
    applied_to: str
    outcome: str
    result: str


def _changed(e: Evidence) -> str:
    d = e.data_as(RerunData)
    if d.changed:
        return "; ".join(d.changed) if isinstance(d.changed, list) else d.changed
    if d.interventions:
        return "; ".join(d.interventions)
    if d.policy:
        return f"policy {d.policy}"
    if d.files or d.reverted:
        files = d.files or [d.reverted]
        to = f" to {d.to_rev}" if d.to_rev else ""
        return f"revert {', '.join(map(str, files))}{to}"
    return e.summary[:80]


def _outcome(e: Evidence) -> str:
    d = e.data_as(RerunData)
    if e.result == EvidenceResult.error:
        return "the rerun failed"
    if d.first_step is not None:
        return f"first differs at step {d.first_step}"
    match = d.match or {}
    if d.common_steps and (match.get("all_match") or e.result == EvidenceResult.supported):
        return f"all {d.common_steps} steps match"
    return "no step differs where both have data, but it is not a match: " + str(
        match.get("note") or d.gaps or "the comparison is incomplete"
    )


def discriminator_rows(state: LedgerState) -> list[DiscriminatorRow]:
    """Every uninstrumented rerun with one thing changed, in the order they ran."""
    return [
        DiscriminatorRow(
            evidence=e.id,
            arm=", ".join(e.hypotheses) or "-",
            changed=_changed(e),
            applied_to=e.data_as(RerunData).applied_to or "B",
            outcome=_outcome(e),
            result=e.result.value,
        )
        for e in state.evidence
        if e.kind == EvidenceKind.rerun
    ]


class VerdictBasis(BaseModel):
    kind: Literal["intervention", "reproducer", "none"]
    text: str
    evidence: str | None = None


def verdict_basis(state: LedgerState) -> VerdictBasis | None:
    """What the recorded verdict rests on: an intervention on the runs that made every step
    match (the strongest proof), or a reproducer (or replay) alone."""
    v = state.verdict
    if v is None:
        return None
    chain = [e for e in state.evidence if e.id in set(v.evidence)]
    mine = [e for e in chain if v.hypothesis and v.hypothesis in e.hypotheses]

    def supporting(*kinds: EvidenceKind) -> Evidence | None:
        return next(
            (e for e in mine if e.kind in kinds and e.result == EvidenceResult.supported), None
        )

    rerun = supporting(EvidenceKind.rerun)
    if rerun is not None:
        return VerdictBasis(
            kind="intervention",
            evidence=rerun.id,
            text=f"validated by an intervention: {_changed(rerun)} applied to "
            f"{rerun.data_as(RerunData).applied_to or 'B'}, uninstrumented: {_outcome(rerun)} ({rerun.id})",
        )
    backing = supporting(EvidenceKind.reproducer, EvidenceKind.replay)
    if backing is not None:
        return VerdictBasis(
            kind="reproducer",
            evidence=backing.id,
            text=f"backed by a {backing.kind.value} only ({backing.id}): no intervention on the "
            "runs made every step match",
        )
    return VerdictBasis(kind="none", text="no execution evidence supports a cause")


def commands_text(argv: list[str]) -> str:
    """Recorded commands, one per line, each quoted for a POSIX shell. Evidence of several
    launches holds them in one list with ';' between commands."""
    import shlex

    cmds: list[list[str]] = [[]]
    for a in argv:
        if a == ";":
            cmds.append([])
        else:
            cmds[-1].append(a)
    return "\n".join(shlex.join(c) for c in cmds if c)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(state: LedgerState) -> str:
    out: list[str] = ["# Evidence ledger", ""]
    if state.case:
        c = state.case
        found = state.confirmed_step()
        if found is not None:
            given = "" if c.mismatch_step in (None, found) else f" (given: {c.mismatch_step})"
            step = f"first mismatching step {found}{given}"
        elif c.mismatch_step is not None:
            step = f"mismatch step {c.mismatch_step} given, not yet confirmed"
        else:
            step = "mismatch step not yet found"
        out += [
            f"**Case** `{c.name}`: run A `{c.run_a.name}` vs run B `{c.run_b.name}`, {step}.",
            "",
        ]
    if state.torn_tail:
        out += [
            f"> The ledger ends in a torn line at byte {state.torn_tail.offset} "
            f"({state.torn_tail.length} bytes), ignored.",
            "",
        ]
    out += ["## Verdict", ""]
    if state.verdict:
        v = state.verdict
        out += [
            f"**{v.classification.value}**: {v.statement}",
            "",
            f"- location: {v.location or 'n/a'}",
            f"- hypothesis: {v.hypothesis or 'none'}",
            f"- evidence chain: {', '.join(v.evidence) or 'none'}",
            f"- basis: {verdict_basis(state).text}",
            f"- next action: {_cell(action_text(v.next_action)) or 'n/a'}",
            *(f"- **caveat**: {_cell(c)}" for c in v.caveats),
            "",
        ]
    else:
        out += ["No verdict recorded.", ""]
        out += [f"- **caveat**: {_cell(c)}" for c in caveats_held(state)]
        out += [""] if caveats_held(state) else []
    out += ["## Hypotheses", ""]
    rows = hypothesis_rows(state)
    if rows:
        out += [
            "| id | hypothesis | category | status | classification | evidence | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            out.append(
                f"| {r.id} | {_cell(r.statement)} | {r.category} | {r.status} | "
                f"{r.classification} | {r.evidence_split} | {'yes' if r.verdict else ''} |"
            )
        why = [h for h in state.hypotheses.values() if h.rationale]
        if why:
            out += ["", "Why each would change the bits:", ""]
            out += [f"- {h.id}: {_cell(h.rationale)}" for h in why]
        against = [r for r in rows if r.status_reason]
        if against:
            out += ["", "Statuses set against evidence that says otherwise, and why:", ""]
            out += [f"- {r.id} {r.status}: {_cell(r.status_reason)}" for r in against]
    else:
        out.append("None recorded.")
    disc = discriminator_rows(state)
    if disc:
        out += [
            "",
            "## Interventions (discriminator table)",
            "",
            "| arm | the one thing changed | applied to | result | evidence |",
            "|---|---|---|---|---|",
        ]
        out += [
            f"| {r.arm} | {_cell(r.changed)} | {r.applied_to} | {_cell(r.outcome)} | {r.evidence} |"
            for r in disc
        ]
    out += ["", "## Evidence", ""]
    for e in state.evidence:
        hyps = ", ".join(e.hypotheses) or "-"
        out.append(f"### {e.id} — {e.kind.value}, {e.result.value} ({hyps})")
        out.append("")
        out.append(_cell(e.summary))
        if e.argv:
            out += ["", "```", commands_text(e.argv), "```"]
        for a in e.artifacts:
            out.append(f"- artifact `{a.path}` sha256 `{a.sha256[:16]}…` ({a.bytes} bytes)")
        if e.duration_s is not None:
            out.append(f"- took {e.duration_s:.2f} s")
        out.append("")
    if state.notes:
        out += ["## Notes", ""]
        out += [f"- {n['ts']}: {_cell(str(n.get('text', '')))}" for n in state.notes]
    return "\n".join(out) + "\n"


def caveats_held(state: LedgerState) -> list[str]:
    """The caveats the ledger holds (an abnormal exit), shown even where no verdict is."""
    return [n["text"] for n in state.notes if n.get("caveat")]
