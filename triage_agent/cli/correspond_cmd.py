"""`triage correspond`: cross-framework correspondence and the compatibility table.

``map A B`` pairs the parameters of two boundary captures by init bytes, shape and
normalised name; ``compare A B`` compares them per step and boundary; ``case`` runs the
case's A and B (B with ``-i`` interventions), compares, and proves each differing
boundary's policy with one intervention on B drawn from B's own configuration surface
(``--no-align``: compare only). Exit 0 every boundary matches, 1 one differs (with
``case``: and every difference was aligned by a proven intervention), 3 (``case``) a
difference stays unproven.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import console, required_case, subgroup, workspace_for
from .options import CaseOpt, WorkspaceOpt

FormatOpt = Annotated[str, typer.Option("--format", help="table | json | md")]
OutOpt = Annotated[
    Path | None, typer.Option("--out", help="write table.json, table.md, mapping.json here")
]


def _exit_code(table) -> int:
    from ..correspond.model import Alignment

    if not isinstance(table, Alignment):
        return 0 if table.first is None else 1
    return 0 if table.launched.first is None else 1 if table.aligned.first is None else 3


def _show(table, mapping, fmt: str, out: Path | None, metrics: str = "") -> None:
    from ..correspond.model import Alignment
    from ..correspond.table import align_markdown, align_rich, markdown, rich_table
    from ..correspond.workflow import write_outputs
    from ..errors import InputError

    if fmt not in ("table", "json", "md"):
        raise InputError(f"--format {fmt!r}: one of table, json, md")
    aligned = isinstance(table, Alignment)
    if fmt == "json":
        typer.echo(table.model_dump_json(indent=1))
    elif fmt == "md":
        typer.echo(align_markdown(table) if aligned else markdown(table), nl=False)
    elif aligned:
        console.print(align_rich(table))
        console.print(f"stopped: {table.stopped}", markup=False)
    else:
        console.print(rich_table(table))
        if table.policy:
            console.print(
                f"first difference: {table.policy.name}: {table.policy.detail}", markup=False
            )
        if metrics:
            console.print(f"metric fingerprints: {metrics}", markup=False)
    if out is not None:
        written = write_outputs(table, mapping, out)
        if fmt == "table":
            console.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)
    sys.exit(_exit_code(table))


def register(app: typer.Typer) -> None:
    group = subgroup(app, "correspond", "Cross-framework boundary correspondence.")

    @group.command("map", help="Pair two captures' parameters and write the mapping as JSON.")
    def map_cmd(
        a: Annotated[Path, typer.Argument(help="capture directory of A")],
        b: Annotated[Path, typer.Argument(help="capture directory of B")],
        out: Annotated[Path | None, typer.Option("--out", help="mapping file")] = None,
    ) -> None:
        from ..correspond.mapping import build_mapping

        m = build_mapping(a, b)
        text = m.model_dump_json(indent=1)
        if out is None:
            typer.echo(text)
        else:
            out.write_text(text)
            console.print(f"{len(m.pairs)} pairs, {len(m.unmapped)} unmapped: {out}", markup=False)

    @group.command("compare", help="Compare two captures per step and boundary.")
    def compare_cmd(
        a: Annotated[Path, typer.Argument(help="capture directory of A")],
        b: Annotated[Path, typer.Argument(help="capture directory of B")],
        fmt: FormatOpt = "table",
        out: OutOpt = None,
    ) -> None:
        from ..correspond.boundaries import build_table

        table, mapping = build_table(a, b)
        _show(table, mapping, fmt, out)

    @group.command(
        "case",
        help="Run the case's A and B (B with interventions), compare, and prove each "
        "differing boundary's policy with one intervention on B.",
    )
    def case_cmd(
        changes: Annotated[
            list[str], typer.Option("--intervene", "-i", help="a change to B, repeatable")
        ] = [],  # noqa: B006 - typer reads the default, never mutates it
        subdir: Annotated[
            str, typer.Option("--boundaries", help="capture directory inside each run's {out}")
        ] = "boundaries",
        align: Annotated[
            bool,
            typer.Option(
                "--align/--no-align", help="prove each difference by rerunning B (default)"
            ),
        ] = True,
        max_reruns: Annotated[int, typer.Option("--max-reruns", help="reruns of B")] = 6,
        max_minutes: Annotated[
            float, typer.Option("--max-minutes", help="minutes the loop may spend")
        ] = 30.0,
        fmt: FormatOpt = "table",
        out: OutOpt = None,
        case: CaseOpt = None,
        workspace: WorkspaceOpt = None,
    ) -> None:
        from ..correspond.align import Budget
        from ..correspond.workflow import align_case, run_case

        cfg, ws = required_case(case), workspace_for(case, workspace)
        if not align:
            r = run_case(cfg, ws, changes, subdir=subdir)
            _show(r.table, r.mapping, fmt, out, r.metrics)
        say = (lambda m: console.print(m, markup=False)) if fmt == "table" else None
        budget = Budget(reruns=max_reruns, minutes=max_minutes)
        res = align_case(cfg, ws, changes, budget=budget, subdir=subdir, progress=say)
        _show(res.alignment, res.mapping, fmt, out)
