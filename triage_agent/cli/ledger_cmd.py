"""`triage ledger show|export`: what a reviewer reads."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ..ledger import dumps_state
from ..ledger_view import (
    action_text,
    discriminator_rows,
    hypothesis_rows,
    to_markdown,
    verdict_basis,
)
from .common import console, err_console, existing_ledger_for
from .options import CaseOpt, WorkspaceOpt

ledger_app = typer.Typer(help="Read the evidence ledger.", no_args_is_help=True)


class ExportFormat(StrEnum):
    md = "md"
    json = "json"


@ledger_app.command("show")
def show(case: CaseOpt = None, workspace: WorkspaceOpt = None) -> None:
    """A table of hypotheses: status, classification, evidence count, verdict."""
    ledger = existing_ledger_for(case, workspace)
    state = ledger.state()
    if state.torn_tail:
        err_console.print(
            f"[yellow]warning:[/] torn last line at byte {state.torn_tail.offset} of "
            f"{escape(str(ledger.path))} ignored ({state.torn_tail.length} bytes); the next "
            "write moves it aside and records a note",
            highlight=False,
        )
    table = Table(title=f"{ledger.path} — {state.events} events, {len(state.evidence)} evidence")
    for col in ("hypothesis", "statement", "status", "classification", "evidence", "verdict"):
        table.add_column(col, overflow="fold")
    colors = {"supported": "green", "refuted": "red", "inconclusive": "yellow", "open": "blue"}
    for r in hypothesis_rows(state):
        table.add_row(
            r.id,
            r.statement,
            f"[{colors.get(r.status, 'white')}]{r.status}[/]",
            r.classification,
            r.evidence_split,
            "[bold]yes[/]" if r.verdict else "",
        )
    console.print(table)
    disc = discriminator_rows(state)
    if disc:
        t = Table(title="interventions (one thing changed, uninstrumented rerun)")
        for col in ("arm", "the one thing changed", "applied to", "result", "evidence"):
            t.add_column(col, overflow="fold")
        for r in disc:
            color = {"supported": "green", "refuted": "red"}.get(r.result, "yellow")
            t.add_row(
                escape(r.arm),
                escape(r.changed),
                escape(r.applied_to),
                f"[{color}]{escape(r.outcome)}[/]",
                r.evidence,
            )
        console.print(t)
    if state.verdict:
        v = state.verdict
        console.print(f"[bold]verdict:[/] {v.classification.value} — {escape(v.statement)}")
        basis = verdict_basis(state)
        if basis is not None:
            console.print(f"[bold]basis:[/] {escape(basis.text)}")
        if v.next_action:
            console.print(f"[bold]next action:[/] {escape(action_text(v.next_action))}")
    else:
        console.print("no verdict recorded")


@ledger_app.command("export")
def export(
    format: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="md or json")
    ] = ExportFormat.md,
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Print the whole ledger state as Markdown or JSON."""
    state = existing_ledger_for(case, workspace).state()
    typer.echo(to_markdown(state) if format == ExportFormat.md else dumps_state(state))


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")
