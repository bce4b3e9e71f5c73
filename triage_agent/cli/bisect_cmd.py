"""`triage bisect`: the first commit that moves the bits, then a minimal set of hunks.

A thin adapter over :func:`triage_agent.bisect.bisect_case`: a progress bar while it
probes (probes done and left, commits left untested, ETA), then a table of the commits probed and the hunks found, each
with its diff. Exit 0 when a minimal set was proven (B with exactly it reverted matches
A), 1 when the search ended without one (not in the range, ambiguous, not reproduced),
2 for bad input, 3 when the budget stopped it (run it again to resume), 130 on Ctrl-C.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.syntax import Syntax
from rich.table import Table

from ..errors import InputError
from .common import CaseOpt, WorkspaceOpt, console, err_console

MARK = {"good": "[green]good[/]", "bad": "[red]bad[/]", "skip": "[yellow]skip[/]"}
EXIT = {"found": 0, "stopped": 3}


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    m, s = divmod(int(seconds), 60)
    return f"ETA {m}:{s:02d}"


def _outcome(q) -> str:
    return f"{MARK[q.outcome]}: {escape(q.said)}" if q else "[dim]-[/]"


def _commit_table(res) -> Table:
    plain = {
        q.tree.base: q
        for q in res.probes
        if not (q.tree.merge or q.tree.revert_commits or q.tree.revert_hunks)
    }
    merged = {q.tree.merge: q for q in res.probes if q.tree.merge}
    culprits = {c.sha for c in res.culprits}
    t = Table(title=f"{res.a_rev}..{res.b_rev}: {len(res.commits)} commit(s), first parents")
    for col in ("#", "commit", "subject", "B there", "note"):
        t.add_column(col)
    for c in res.commits:
        q = plain.get(c.sha) or merged.get(c.sha)
        notes = []
        if res.first_bad and c.sha == res.first_bad.sha:
            notes.append("[bold]first bad[/]")
        if c.sha in culprits:
            notes.append("culprit")
        if c.side_of:
            notes.append(f"side of {c.side_of[:10]}")
        t.add_row(
            str(c.index),
            c.short,
            escape(c.subject),
            MARK[q.outcome] if q else "[dim]-[/]",
            ", ".join(notes),
        )
    return t


def _show(res) -> None:
    console.print(_commit_table(res))
    if res.hunks:
        t = Table(title="a minimal set of hunks (reverted in B)")
        for col in ("hunk", "location in B", "commit", "reverted alone", "kept alone"):
            t.add_column(col)
        for h in res.hunks:
            t.add_row(
                h.hunk.id,
                escape(h.hunk.location),
                h.hunk.commit[:10],
                _outcome(h.alone),
                _outcome(h.kept),
            )
        console.print(t)
        for h in res.hunks:
            console.print(f"[bold]{escape(h.hunk.location)}[/] ({h.hunk.commit[:10]})")
            console.print(Syntax(h.hunk.diff, "diff", theme="ansi_dark", word_wrap=True))
    if res.proof is not None:
        console.print(
            f"proof: {MARK[res.proof.outcome]} {escape(res.proof.said)} ({res.proof.evidence_id})"
        )
    console.print(escape(res.message), soft_wrap=True)
    console.print(
        f"[dim]{len(res.probes)} probe(s): {res.reruns} launched, {res.cached} reusing the "
        f"outputs of an identical tree, {res.reused} read back from the ledger; "
        f"{res.probes_to_first_bad} to the first bad commit; {res.seconds:.0f} s[/]"
    )


def register(app: typer.Typer) -> None:
    @app.command(
        "bisect",
        help="Bisect the runs' source revisions to the first commit whose B run differs from A "
        "(uninstrumented, every step and rank), then delta-debug commits and hunks to a minimal "
        "set whose revert makes B match A. Every probe is ledger evidence; a stopped bisection "
        "resumes (exit 0 proven, 1 no proven set, 2 bad input, 3 budget reached).",
    )
    def bisect_cmd(
        case: CaseOpt = None,
        workspace: WorkspaceOpt = None,
        repo: Annotated[
            Path | None,
            typer.Option("--repo", help="repository to bisect (default: runs.b.source.repo)"),
        ] = None,
        rev_range: Annotated[
            str | None,
            typer.Option("--range", help="A..B (default: the runs' source revisions)"),
        ] = None,
        hunks: Annotated[
            bool, typer.Option("--hunks/--no-hunks", help="narrow culprit commits to hunks")
        ] = True,
        budget_minutes: Annotated[
            float,
            typer.Option("--budget-minutes", help="start no probe after this long", min=0),
        ] = 60.0,
        timeout: Annotated[
            float | None, typer.Option("--timeout", help="seconds per command (default: case's)")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    ) -> None:
        from ..bisect import BisectProgress, bisect_case
        from ..config import load_case
        from ..ledger import Ledger

        cfg = load_case(case)
        if cfg is None:
            raise InputError("no case: pass --case or run in a directory with a triage.toml")
        if workspace is not None:
            cfg.workspace = str(workspace.resolve())
        ledger = Ledger(cfg.workspace)
        bar = Progress(
            TextColumn("[bold]{task.fields[phase]:<7}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[commits]}"),
            TextColumn("{task.fields[eta]}"),
            TextColumn("{task.description}"),
            console=err_console,
            transient=True,
        )
        seen = [0]
        with bar:
            task = bar.add_task("", total=None, phase="", commits="", eta="")

            def progress(p: BisectProgress) -> None:
                if p.done > seen[0]:
                    seen[0] = p.done
                    bar.console.print(f"[dim]{p.phase:<7}[/] {escape(p.message)}", highlight=False)
                total = p.done + p.left if p.left is not None else None
                bar.update(
                    task,
                    completed=p.done,
                    total=total,
                    phase=p.phase,
                    commits="" if p.commits_left is None else f"{p.commits_left} commit(s) left",
                    eta=_eta(p.eta_s),
                    description=escape(p.message[:70]),
                )

            try:
                res = bisect_case(
                    cfg,
                    ledger,
                    repo=repo,
                    rev_range=rev_range,
                    hunks=hunks,
                    budget_s=budget_minutes * 60,
                    timeout_s=timeout,
                    progress=progress,
                )
            except KeyboardInterrupt:
                ledger.note("bisection interrupted", level="warning")
                bar.stop()
                err_console.print(
                    "[yellow]interrupted[/]: every finished probe is in the ledger; run "
                    "`triage bisect` again to resume without rerunning them"
                )
                raise typer.Exit(130) from None
        if as_json:
            typer.echo(res.model_dump_json(indent=1))
        else:
            _show(res)
        raise typer.Exit(EXIT.get(res.status, 1))
