"""The compatibility table as text a person reads (rich), Markdown and JSON."""

from __future__ import annotations

from rich.table import Table

from .model import CompatTable


def verdict_line(t: CompatTable, boundary: str) -> str:
    """``megatron vs deepspeed boundary grads: differs (policy)``: one line per boundary."""
    row = next(r for r in t.rows if r.boundary == boundary)
    said = row.verdict if row.verdict != "differs" else f"differs ({row.policy})"
    return f"{t.a.split()[0]} vs {t.b.split()[0]} boundary {boundary}: {said}"


def rich_table(t: CompatTable) -> Table:
    title = f"{t.a}  vs  {t.b}: {t.steps} steps, {t.pairs} pairs, {t.unmapped} unmapped"
    if t.intervention:
        title += f"\nB with: {t.intervention}"
    out = Table(title=title)
    for col in ("boundary", "verdict", "from step", "policy", "detail"):
        out.add_column(col)
    for r in t.rows:
        colour = {"match": "green", "differs": "red"}.get(r.verdict, "yellow")
        out.add_row(
            r.boundary,
            f"[{colour}]{r.verdict}[/]",
            "" if r.first_step is None else str(r.first_step),
            r.policy or "",
            r.detail,
        )
    return out


def markdown(t: CompatTable) -> str:
    lines = [
        f"A: {t.a}  ",
        f"B: {t.b}" + (f", with `{t.intervention}`" if t.intervention else "") + "  ",
        f"{t.steps} steps compared, {t.pairs} parameter pairs, {t.unmapped} unmapped",
        "",
        "| boundary | verdict | from step | policy | detail |",
        "|---|---|---|---|---|",
    ]
    for r in t.rows:
        step = "" if r.first_step is None else str(r.first_step)
        lines.append(f"| {r.boundary} | {r.verdict} | {step} | {r.policy or ''} | {r.detail} |")
    if t.policy:
        lines += ["", f"First difference: {t.policy.name}: {t.policy.detail}"]
    lines += ["", *(verdict_line(t, r.boundary) for r in t.rows)]
    return "\n".join(lines) + "\n"
