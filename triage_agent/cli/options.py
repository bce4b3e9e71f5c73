"""Options more than one command takes, declared once so their flags and help agree."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

CaseOpt = Annotated[
    Path | None, typer.Option("--case", help="Case file (default: ./triage.toml if present).")
]
WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", "-w", help="Workspace directory (default: the case's, or .triage)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON")]

# Options of the commands that launch a training command (trace, record).
RunIdOpt = Annotated[str, typer.Option("--run-id", help="label in every header")]
PolicyOpt = Annotated[
    list[str] | None, typer.Option("--policy", help="policy applied in every process")
]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="seconds before the run is killed")
]
RanksOpt = Annotated[str | None, typer.Option("--ranks", help="e.g. 0,1 or 0-3")]
CommandArg = Annotated[list[str], typer.Argument(help="the training command, after --")]
