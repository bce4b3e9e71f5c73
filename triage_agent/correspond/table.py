"""The compatibility table as text a person reads (rich), Markdown and JSON."""

from __future__ import annotations

from rich.table import Table

from .model import Alignment, AlignRow, CompatTable, TableRow


def verdict_line(t: CompatTable, boundary: str) -> str:
    """``megatron vs deepspeed boundary grads: differs (policy)``: one line per boundary."""
    row = next(r for r in t.rows if r.boundary == boundary)
    said = row.verdict if row.verdict != "differs" else f"differs ({row.policy})"
    return f"{t.a.split()[0]} vs {t.b.split()[0]} boundary {boundary}: {said}"


def _step(r: TableRow | AlignRow) -> str:
    return "" if r.first_step is None else str(r.first_step)


def _coloured(verdict: str) -> str:
    colour = {"match": "green", "differs": "red"}.get(verdict, "yellow")
    return f"[{colour}]{verdict}[/]"


def _rich_head(t: CompatTable | Alignment, extra: str, with_: str | None, cols: list[str]) -> Table:
    """A table of boundaries titled by its sides and counts (then ``extra``), and what B ran
    with when anything."""
    title = f"{t.a}  vs  {t.b}: {t.steps} steps, {t.pairs} pairs, {t.unmapped} unmapped{extra}"
    if with_:
        title += f"\nB with: {with_}"
    out = Table(title=title)
    for col in ("boundary", *cols):
        out.add_column(col)
    return out


def rich_table(t: CompatTable) -> Table:
    out = _rich_head(t, "", t.intervention, ["verdict", "from step", "policy", "detail"])
    for r in t.rows:
        out.add_row(r.boundary, _coloured(r.verdict), _step(r), r.policy or "", r.detail)
    return out


def _md_head(a: str, b: str, t: CompatTable | Alignment, extra: str, cols: list[str]) -> list[str]:
    """The sides, the counts (then ``extra``) and the head of a table of boundaries."""
    return [
        f"A: {a}  ",
        f"B: {b}  ",
        f"{t.steps} steps compared, {t.pairs} parameter pairs, {t.unmapped} unmapped{extra}",
        "",
        "| " + " | ".join(["boundary", *cols]) + " |",
        "|" + "---|" * (len(cols) + 1),
    ]


def markdown(t: CompatTable) -> str:
    with_ = f", with `{t.intervention}`" if t.intervention else ""
    lines = _md_head(t.a, t.b + with_, t, "", ["verdict", "from step", "policy", "detail"])
    for r in t.rows:
        lines.append(f"| {r.boundary} | {r.verdict} | {_step(r)} | {r.policy or ''} | {r.detail} |")
    if t.policy:
        lines += ["", f"First difference: {t.policy.name}: {t.policy.detail}"]
    lines += ["", *(verdict_line(t, r.boundary) for r in t.rows)]
    return "\n".join(lines) + "\n"


# -- the alignment: the compatibility table with each policy's proof ------------------------
def _sides(t: CompatTable | Alignment) -> str:
    return f"{t.a.split()[0]} vs {t.b.split()[0]}"


def align_said(r: AlignRow) -> str:
    """match / differs (policy, from step N), proven by X / unproven / matches once aligned."""
    if r.launched != "differs":
        return r.launched
    said = f"differs ({r.policy or 'unnamed'}, from step {r.first_step})"
    if r.proven_by == "unproven":
        return f"{said}, unproven"
    if r.proven_by:
        return f"{said}, proven by {r.proven_by}"
    if r.aligned == "match":
        return f"{said}, matches with the proven alignments"
    return f"{said}, not reached"


def align_line(t: Alignment, r: AlignRow) -> str:
    """``megatron vs deepspeed boundary master_weights: differs (...), proven by ...``."""
    return f"{_sides(t)} boundary {r.boundary}: {align_said(r)}"


def _attempt_lines(t: Alignment) -> list[str]:
    out = []
    for i, s in enumerate(t.walk, 1):
        name = s.policy.name if s.policy else "unnamed"
        out.append(f"{i}. {s.boundary} at step {s.step}: {name}")
        for a in s.attempts:
            out.append(
                f"   - `{a.candidate.intervention}` ({a.candidate.source}: "
                f"{a.candidate.governs}): {a.outcome}; {a.detail}"
            )
        if s.proven_by is None:
            out.append(f"   - unproven: {s.unproven_why}")
    return out


def align_rich(t: Alignment) -> Table:
    cols = ["as launched", "from step", "policy", "proven by", "aligned"]
    out = _rich_head(t, f", {t.reruns} reruns of B", "; ".join(t.given), cols)
    for r in t.rows:
        out.add_row(
            r.boundary,
            _coloured(r.launched),
            _step(r),
            r.policy or "",
            r.proven_by or "",
            _coloured(r.aligned),
        )
    return out


def align_markdown(t: Alignment) -> str:
    with_ = f", with `{'; '.join(t.given)}`" if t.given else ""
    extra = f", {t.reruns} reruns of B, {t.seconds} s"
    cols = ["as launched", "from step", "policy", "proven by", "aligned"]
    lines = _md_head(t.a, t.b + with_, t, extra, cols)
    for r in t.rows:
        proof = (
            f"`{r.proven_by}`" if r.proven_by and r.proven_by != "unproven" else (r.proven_by or "")
        )
        lines.append(
            f"| {r.boundary} | {r.launched} | {_step(r)} | {r.policy or ''} | {proof} | {r.aligned} |"
        )
    lines += ["", "Proven policies: " + ("; ".join(f"`{k}`" for k in t.kept) or "none")]
    lines += ["", *_attempt_lines(t), "", f"Stopped: {t.stopped}", ""]
    lines += [align_line(t, r) for r in t.rows]
    return "\n".join(lines) + "\n"
