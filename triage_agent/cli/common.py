"""Shared CLI helpers: the workspace of the current case, consoles, option types."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..config import load_case
from ..errors import LedgerError
from ..ledger import Ledger

console = Console(soft_wrap=False)
err_console = Console(stderr=True, soft_wrap=True)

CaseOpt = Annotated[
    Path | None, typer.Option("--case", help="Case file (default: ./triage.toml if present).")
]
WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", "-w", help="Workspace directory (default: the case's, or .triage)."
    ),
]


def workspace_for(case_path: Path | None, workspace: Path | None) -> Path:
    if workspace is not None:
        return workspace
    case = load_case(case_path)
    return Path(case.workspace) if case else Path(".triage")


def ledger_for(case_path: Path | None, workspace: Path | None) -> Ledger:
    return Ledger(workspace_for(case_path, workspace))


def existing_ledger_for(case_path: Path | None, workspace: Path | None) -> Ledger:
    """The ledger for read-only commands: a missing file is a mistake (wrong -w), not an empty case."""
    ledger = ledger_for(case_path, workspace)
    if not ledger.path.is_file():
        raise LedgerError(f"no ledger at {ledger.path}: run `triage run` first or pass --workspace")
    return ledger
