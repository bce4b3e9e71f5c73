"""`triage compare A [B]`: a thin wrapper over triage_agent.compare.

Exit codes: 0 identical, 1 diverged, 2 malformed input (the message names file and line),
3 identical but incomplete.
"""

from __future__ import annotations

from contextlib import nullcontext
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table
from typer.core import TyperCommand

from ..compare import export_perfetto, load_pair, load_runs, to_markdown
from ..compare.distributed import Executor, compare_paths
from ..compare.executors import LOCAL
from ..compare.result import CompareResult, EventRef
from .common import console, err_console

RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Compare the ranks on Ray: a bare --ray starts a local cluster; an address "
        "(host:port, ray://host:port, auto) uses an existing one. Needs the ray extra.",
    ),
]
WorkersOpt = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        max=1024,
        help="Compare the ranks on N local processes (with --ray: at most N tasks at once).",
    ),
]


def bare_option_value(args: list[str], option: str, value: str) -> list[str]:
    """``option`` given without a value (last, or before another option) becomes
    ``option=value``: the parser has no options whose value is optional."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        nxt = out[i + 1] if i + 1 < len(out) else None
        if arg == option and (nxt is None or nxt.startswith("-")):
            out[i] = f"{option}={value}"
    return out


class BareRayCommand(TyperCommand):
    """A command whose ``--ray`` may be given bare (a local cluster) or with an address."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        return super().parse_args(ctx, bare_option_value(args, "--ray", LOCAL))


class OutFormat(StrEnum):
    table = "table"
    json = "json"
    md = "md"
    perfetto = "perfetto"


def _where(r: EventRef | None) -> str:
    if r is None:
        return "-"
    return escape(f"{r.name} [{r.scope or '<root>'}] step {r.step} #{r.index} line {r.line}")


def _table(res: CompareResult) -> None:
    t = Table(title=f"trace comparison: {res.status}" + ("" if res.complete else " (incomplete)"))
    cols = ("rank", "status", "paired", "differ", "unmatched", "first divergence")
    cols += ("first candidate", "origin")
    for col in cols:
        t.add_column(col)
    for r in res.ranks:
        fd = r.first_divergence
        first = f"{fd.role}: {_where(fd.a or fd.b)}" if fd else "-"
        if fd and fd.labels:
            first += " (" + ", ".join(lb.code for lb in fd.labels) + ")"
        c0 = r.candidates[0] if r.candidates else None
        cand = "-"
        if c0 is not None:
            cand = f"{c0.kind}: {_where(c0.b or c0.a)}" + (" (writes state)" * c0.writes_state)
        origin = (
            _where(r.origin.a)
            if r.origin
            else ("outside capture scope" if r.outside_scope else "-")
        )
        t.add_row(
            str(r.rank),
            r.status,
            str(r.matched),
            str(r.differing),
            str(r.unmatched_total),
            first,
            cand,
            origin,
        )
    console.print(t)
    s = res.summary
    console.print(
        f"origins on ranks {s.origin_ranks or '-'}; receivers only {s.receiver_only_ranks or '-'};"
        f" first candidate only one run executes {s.unmatched_first_ranks or '-'};"
        f" identical {s.identical_ranks or '-'}; incomplete {s.incomplete_ranks or '-'}",
        highlight=False,
    )
    if s.note:
        console.print(s.note, highlight=False, markup=False)
    for r in res.ranks:
        if r.candidates:
            shown = (
                f"{len(r.candidates)} of {r.candidates_total}, "
                if r.candidates_total > len(r.candidates)
                else ""
            )
            console.print(
                f"rank {r.rank}: first-divergence candidates ({shown}execution order):",
                highlight=False,
            )
            for n, c in enumerate(r.candidates[:10], start=1):
                console.print(f"  {n}. {c.describe()}", highlight=False, markup=False)
        if r.first_receiver is not None:
            for p in r.first_receiver.producers:
                console.print(
                    f"rank {r.rank}: first receiver {r.first_receiver.b.name if r.first_receiver.b else '?'} "
                    f"{p.describe()}",
                    highlight=False,
                    markup=False,
                )
        if r.outside_scope:
            said = r.outside_scope.sentences()
            console.print(
                f"rank {r.rank}: no origin on the traced events; widen the capture. {said}",
                highlight=False,
                markup=False,
            )
        for u in r.unmatched[:10]:
            e = u.event
            console.print(
                f"rank {r.rank}: unmatched in {e.run.upper()} ({u.reason}): {_where(e)}",
                highlight=False,
            )
        if r.unmatched_total > 10:
            console.print(
                f"rank {r.rank}: ... {r.unmatched_total - 10} more unmatched (--format json)"
            )
    for w in res.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


def compare(
    a: Annotated[
        Path,
        typer.Argument(help="Run A: a trace directory or file (or one file holding both runs)."),
    ],
    b: Annotated[Path | None, typer.Argument(help="Run B (omit when A holds both runs).")] = None,
    rank: Annotated[
        list[int] | None, typer.Option("--rank", "-r", help="Compare only this rank (repeatable).")
    ] = None,
    mapping: Annotated[
        Path | None,
        typer.Option("--map", help="Correspondence map (TOML/JSON regex rules, A -> B)."),
    ] = None,
    fmt: Annotated[
        OutFormat, typer.Option("--format", "-f", help="Output: table, json, md or perfetto.")
    ] = OutFormat.table,
    input_format: Annotated[
        str,
        typer.Option(
            "--input-format", help="auto, native, bridge, megatron-lm, debugmode, chrome."
        ),
    ] = "auto",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write json/md/perfetto output to this file.")
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Validate every native trace line, not only those that differ."
        ),
    ] = False,
    ray: RayOpt = None,
    workers: WorkersOpt = 1,
) -> None:
    """Align two traced runs rank by rank and report each rank's first divergence.

    With --workers N or --ray the ranks are compared on workers that read the traces from
    the paths given (a path every worker sees); the result is the same.

    Exit codes: 0 identical, 1 diverged, 2 malformed input, 3 identical but incomplete.
    """
    executor = Executor(workers=workers, ray=ray)
    show = executor.distributed and err_console.is_terminal
    with Progress(console=err_console, transient=True) if show else nullcontext() as bar:
        task = bar.add_task("comparing ranks", total=None) if bar else None
        res = compare_paths(
            a,
            b,
            input_format=input_format,
            mapping=mapping,
            ranks=rank or None,
            strict=strict,
            executor=executor,
            progress=(lambda d, t: bar.update(task, completed=d, total=t)) if bar else None,
        )
    if fmt is OutFormat.perfetto:
        # the view needs the events themselves, so the runs are read here as well
        run_a, run_b = (
            load_pair(a, input_format) if b is None else load_runs(a, b, input_format, strict)
        )
        path = export_perfetto(res, run_a, run_b, out or Path("compare_trace.json"))
        console.print(
            f"trace view written to {path} (open in ui.perfetto.dev)", highlight=False, markup=False
        )
    elif fmt is OutFormat.table:
        _table(res)
    else:
        text = res.model_dump_json(indent=2) if fmt is OutFormat.json else to_markdown(res)
        if out:
            out.write_text(text)
        else:
            typer.echo(text)
    # identical over an incomplete input (a torn or missing rank) is not a pass
    raise typer.Exit(1 if res.status != "identical" else 0 if res.complete else 3)


def register(app: typer.Typer) -> None:
    app.command("compare", cls=BareRayCommand)(compare)
