"""`triage scan`: bounded static probes over source, ranked for the mismatch phase.

A thin wrapper over ``probes.scan.run_scan``; the MCP server calls the same function.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import InputError
from .common import console


class OutFormat(StrEnum):
    table = "table"
    json = "json"
    sarif = "sarif"


class PhaseOpt(StrEnum):
    first_step = "first-step"
    resume = "resume"
    gas_boundary = "gas-boundary"
    multi_rank = "multi-rank"
    update = "update"


def _render_table(result) -> None:
    table = Table(
        title=f"{result.total_findings} findings in {result.files_scanned}/{result.files_total} files, "
        f"{result.lines} lines, {result.seconds:.2f} s"
        + (f", phase {result.phase}" if result.phase else "")
    )
    for col in ("score", "probe", "location", "function", "reproducer"):
        table.add_column(col, overflow="fold")
    for f in result.findings:
        table.add_row(
            f"{f.score:.2f}",
            f.probe_id,
            f"{f.file}:{f.line_start}",
            f.function or "",
            f.reproducer.template if f.reproducer else "-",
        )
    console.print(table)
    if len(result.findings) < result.total_findings:
        console.print(f"showing the top {len(result.findings)} of {result.total_findings}")
    if result.budget_hit:
        console.print(f"[yellow]budget:[/] {escape(str(result.budget_hit))}")
    for p in result.parse_errors[:10]:
        console.print(
            f"[yellow]parse:[/] {escape(f'{p.file}:{p.line}: {p.message}')}", highlight=False
        )
    if len(result.parse_errors) > 10:
        console.print(
            f"[yellow]parse:[/] {len(result.parse_errors) - 10} more files with syntax errors"
        )
    for s in result.skipped:
        console.print(f"[yellow]skipped:[/] {escape(f'{s.file}: {s.reason}')}", highlight=False)


def scan(
    paths: Annotated[
        list[str] | None, typer.Argument(help="Files, directories or dotted modules.")
    ] = None,
    diff: Annotated[
        str | None, typer.Option("--diff", help="REV_A..REV_B: scan the changed hunks only.")
    ] = None,
    repo: Annotated[Path | None, typer.Option("--repo", help="Git repository for --diff.")] = None,
    category: Annotated[
        list[str] | None, typer.Option("--category", "-c", help="Only this category (repeatable).")
    ] = None,
    probe: Annotated[
        list[str] | None, typer.Option("--probe", help="Only this probe id (repeatable).")
    ] = None,
    function: Annotated[
        list[str] | None,
        typer.Option("--function", help="Only findings in this function (repeatable)."),
    ] = None,
    around: Annotated[
        list[str] | None,
        typer.Option("--around", help="FILE:LINE; scan a window around it (repeatable)."),
    ] = None,
    window: Annotated[
        int, typer.Option("--window", help="Lines each side of --around / diff hunks.")
    ] = 40,
    phase: Annotated[
        PhaseOpt | None, typer.Option("--phase", help="Mismatch phase, for ranking.")
    ] = None,
    max_files: Annotated[int | None, typer.Option("--max-files", help="File budget.")] = None,
    max_seconds: Annotated[
        float | None, typer.Option("--max-seconds", help="Time budget in seconds.")
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="Extra glob to exclude (repeatable).")
    ] = None,
    no_default_excludes: Annotated[
        bool, typer.Option("--no-default-excludes", help="Scan tests and vendored code too.")
    ] = False,
    top: Annotated[int | None, typer.Option("--top", help="Keep the K best findings.")] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Processes (default: automatic).")
    ] = None,
    fmt: Annotated[
        OutFormat, typer.Option("--format", "-f", help="table, json or sarif.")
    ] = OutFormat.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write json/sarif here instead of stdout.")
    ] = None,
    list_probes: Annotated[
        bool, typer.Option("--list-probes", help="List the probes and exit.")
    ] = False,
) -> None:
    """Run the static probes over a bounded scope and rank the findings."""
    from probes.registry import all_probes
    from probes.sarif import to_sarif
    from probes.scan import DEFAULT_EXCLUDES, ScanRequest, run_scan

    if list_probes and fmt is not OutFormat.table:
        rows = [
            {
                "id": p.id,
                "category": p.category.value,
                "severity": p.severity,
                "reproducer": p.template,
                "title": p.title,
            }
            for p in all_probes()
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    if list_probes:
        table = Table(title="probes")
        for col in ("id", "category", "severity", "reproducer", "title"):
            table.add_column(col, overflow="fold")
        for p in all_probes():
            table.add_row(p.id, p.category.value, p.severity, p.template or "-", p.title)
        console.print(table)
        return
    if output is not None and fmt is OutFormat.table:
        raise InputError("--output writes json or sarif: add --format json or --format sarif")
    req = ScanRequest(
        paths=paths or [],
        diff=diff,
        repo=str(repo) if repo else None,
        categories=category or [],
        probes=probe or [],
        functions=function or [],
        around=around or [],
        window=window,
        phase=phase.value if phase else None,
        max_files=max_files,
        max_seconds=max_seconds,
        exclude_globs=([] if no_default_excludes else list(DEFAULT_EXCLUDES)) + (exclude or []),
        top_k=top,
        workers=workers,
    )
    if fmt is OutFormat.table and console.is_terminal:
        with Progress(
            TextColumn("scanning"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("scan", total=None)
            result = run_scan(
                req, progress=lambda done, total, _f: bar.update(task, completed=done, total=total)
            )
    else:
        result = run_scan(req)
    if fmt is OutFormat.table:
        _render_table(result)
        return
    doc = (
        to_sarif(result)
        if fmt is OutFormat.sarif
        else {"schema": "triage.scan/1", **result.model_dump(mode="json")}
    )
    text = json.dumps(doc, indent=2)
    if output is not None:
        output.write_text(text + "\n")
        console.print(f"wrote {output} ({result.total_findings} findings)", markup=False)
    else:
        typer.echo(text)


def register(app: typer.Typer) -> None:
    app.command("scan")(scan)
