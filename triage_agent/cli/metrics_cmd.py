"""`triage metrics diff A B`: the first step whose metric bits differ, and a distance plot."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .common import console, subgroup
from .options import JsonOpt


def register(app: typer.Typer) -> None:
    group = subgroup(app, "metrics", "Metric fingerprints (exact bits per step and rank).")

    @group.command(
        "diff",
        help="First step whose bits differ (exit 0 equal, 1 different, 3 equal where both "
        "have data but one run lacks ranks or steps).",
    )
    def diff(
        a: Annotated[Path, typer.Argument(help="metrics dir or file of run A")],
        b: Annotated[Path, typer.Argument(help="metrics dir or file of run B")],
        plot: Annotated[
            Path | None,
            typer.Option(
                "--plot",
                help="also write a PNG of the per-step distance per metric (a .png file in an "
                "existing directory); none unless asked",
            ),
        ] = None,
        no_plot: Annotated[bool, typer.Option("--no-plot", help="no PNG (the default)")] = False,
        as_json: JsonOpt = False,
    ) -> None:
        from ..metrics import diff_metrics, load_metrics
        from ..metrics_plot import check_png_path, distance, plot_metric_distance

        if not no_plot and plot is not None:
            check_png_path(plot)  # before loading: a bad --plot is reported at once
        ra, rb = load_metrics(a), load_metrics(b)
        d = diff_metrics(ra, rb)
        png = None if no_plot or plot is None else plot_metric_distance(ra, rb, plot)
        if as_json:
            typer.echo(d.model_dump_json(indent=1))
        else:
            if d.first_step is None and d.complete:
                console.print(
                    f"[green]bitwise equal[/] over {len(d.common_steps)} common steps, ranks {d.ranks}"
                )
            elif d.first_step is None:
                console.print(
                    f"[yellow]equal where both have data, but INCOMPLETE[/]: "
                    f"{len(d.common_steps)} common steps, ranks {d.ranks}; {escape(d.gaps())}",
                    soft_wrap=True,
                )
            else:
                console.print(
                    f"first differing step: [bold]{d.first_step}[/] "
                    f"(last equal: {d.last_equal_step})"
                )
                t = Table()
                for col in ("rank", "metric", "A bits", "B bits", "distance"):
                    t.add_column(col)
                for m in d.mismatches:
                    if m.a is not None and m.b is not None:
                        dist, unit = distance(m.a, m.b)
                        dd = f"{dist:g} {unit}"
                    else:
                        dd = "missing"
                    t.add_row(
                        str(m.rank),
                        m.metric,
                        m.a.bits if m.a else "-",
                        m.b.bits if m.b else "-",
                        dd,
                    )
                console.print(t)
            for label, v in (
                ("resumed (A)", d.resumes_a),
                ("resumed (B)", d.resumes_b),
                ("only in A", d.only_in_a if d.first_step is not None else []),
                ("only in B", d.only_in_b if d.first_step is not None else []),
                ("ranks only in A", d.ranks_only_in_a if d.first_step is not None else []),
                ("ranks only in B", d.ranks_only_in_b if d.first_step is not None else []),
            ):
                if v:
                    console.print(f"{label}: {v}", highlight=False, markup=False)
            if png:
                console.print(f"plot: {png}", markup=False)
        sys.exit(1 if d.first_step is not None else 0 if d.complete else 3)
