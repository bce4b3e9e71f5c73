"""Renderings of the ledger state that do not need the terminal: rows and Markdown."""

from __future__ import annotations

from pydantic import BaseModel

from .ledger import LedgerState


class HypothesisRow(BaseModel):
    id: str
    statement: str
    category: str
    status: str
    classification: str
    evidence: int
    verdict: bool


def hypothesis_rows(state: LedgerState) -> list[HypothesisRow]:
    verdict_h = state.verdict.hypothesis if state.verdict else None
    return [
        HypothesisRow(
            id=h.id,
            statement=h.statement,
            category=h.category,
            status=h.status.value,
            classification=h.classification.value,
            evidence=len(state.evidence_for(h.id)),
            verdict=h.id == verdict_h,
        )
        for h in state.hypotheses.values()
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(state: LedgerState) -> str:
    out: list[str] = ["# Evidence ledger", ""]
    if state.case:
        c = state.case
        found = next(
            (
                s.get("step")
                for s in reversed(state.stages)
                if s.get("stage") == "confirm" and s.get("status") == "done"
            ),
            None,
        )
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
            f"- next action: {v.next_action or 'n/a'}",
            "",
        ]
    else:
        out += ["No verdict recorded.", ""]
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
                f"{r.classification} | {r.evidence} | {'yes' if r.verdict else ''} |"
            )
        why = [h for h in state.hypotheses.values() if h.rationale]
        if why:
            out += ["", "Why each would change the bits:", ""]
            out += [f"- {h.id}: {_cell(h.rationale)}" for h in why]
    else:
        out.append("None recorded.")
    out += ["", "## Evidence", ""]
    for e in state.evidence:
        hyps = ", ".join(e.hypotheses) or "-"
        out.append(f"### {e.id} — {e.kind.value}, {e.result.value} ({hyps})")
        out.append("")
        out.append(_cell(e.summary))
        if e.argv:
            out += ["", "```", " ".join(e.argv), "```"]
        for a in e.artifacts:
            out.append(f"- artifact `{a.path}` sha256 `{a.sha256[:16]}…` ({a.bytes} bytes)")
        if e.duration_s is not None:
            out.append(f"- took {e.duration_s:.2f} s")
        out.append("")
    if state.notes:
        out += ["## Notes", ""]
        out += [f"- {n['ts']}: {_cell(str(n.get('text', '')))}" for n in state.notes]
    return "\n".join(out) + "\n"
