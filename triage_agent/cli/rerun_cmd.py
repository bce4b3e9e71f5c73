"""`triage rerun --run b --intervene "env OMP_NUM_THREADS=1"`: one run rerun with one thing changed.

The rerun is uninstrumented, compared bit for bit with the other run's baseline over every
step and rank, and recorded in the ledger as rerun evidence. Exit 0 when every step
matches, 1 when a step still differs, 3 when the runs cannot be compared in full (a run
failed, a rank or a step is missing, a patch never took effect).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ..errors import InputError
from .common import console, err_console, required_case
from .options import CaseOpt, JsonOpt, WorkspaceOpt


def register(app: typer.Typer) -> None:
    @app.command(
        "rerun",
        help="Rerun one run of the case uninstrumented with interventions, compare it with the "
        "other run over every step and rank, record the evidence (exit 0 all match, 1 a step "
        "differs, 3 not comparable in full).",
    )
    def rerun_cmd(
        run: Annotated[
            str,
            typer.Option(
                "--run",
                help="the run to change: a, b, its name, or both (the same change in each, compared with each other)",
            ),
        ],
        changes: Annotated[
            list[str],
            typer.Option(
                "--intervene",
                "-i",
                help="one change, repeatable: 'env K=V', 'unset K', 'config a.b=V', "
                "'config --flag=V', 'suppress pkg.mod:Qual.name', "
                "'replace pkg.mod:f=pkg2.mod:g', 'restore-rng', 'deterministic'",
            ),
        ] = [],  # noqa: B006 - typer reads the default, never mutates it
        hypothesis: Annotated[
            list[str],
            typer.Option("--hypothesis", "-H", help="hypothesis id the result bears on"),
        ] = [],  # noqa: B006
        source_dir: Annotated[
            Path | None,
            typer.Option("--source-dir", help="run from this prepared copy of the checkout"),
        ] = None,
        timeout: Annotated[
            float | None, typer.Option("--timeout", help="seconds per command (default: case's)")
        ] = None,
        as_json: JsonOpt = False,
        case: CaseOpt = None,
        workspace: WorkspaceOpt = None,
    ) -> None:
        from ..interventions import intervene, parse_intervention
        from ..ledger import Ledger

        cfg = required_case(case)
        if not changes and source_dir is None:
            raise InputError("no intervention: give --intervene (e.g. 'env OMP_NUM_THREADS=1')")
        ivs = [parse_intervention(t) for t in changes]
        ledger = Ledger(workspace if workspace is not None else Path(cfg.workspace))
        res = intervene(
            cfg,
            run,
            ivs,
            ledger=ledger,
            hypotheses=hypothesis,
            timeout_s=timeout,
            source_dir=source_dir,
            progress=lambda msg: err_console.print(f"[dim]{escape(msg)}[/]", highlight=False),
        )
        if as_json:
            typer.echo(res.model_dump_json(indent=1))
        else:
            what = "; ".join(res.changed) or f"source from {source_dir}"
            console.print(
                f"run {escape(res.run)} with {escape(what)}: [bold]{escape(res.line)}[/] "
                f"against {escape(res.compared_with)} ({res.result.value}, {res.evidence_id})",
                highlight=False,
                soft_wrap=True,
            )
        if not res.match.all_match:
            raise typer.Exit(1 if res.match.first_differing_step is not None else 3)
