"""Shared CLI helpers: the workspace and case of the current command, consoles, groups."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..config import load_case
from ..errors import InputError, LedgerError
from ..ledger import Ledger
from ..records import Case
from .options import CaseOpt, WorkspaceOpt  # noqa: F401  (bisect_cmd imports them from here)

console = Console(soft_wrap=False)
err_console = Console(stderr=True, soft_wrap=True)


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


def required_case(case_path: Path | None) -> Case:
    """The case of a command that cannot run without one; none found is bad input."""
    case = load_case(case_path)
    if case is None:
        raise InputError("no case: pass --case or run in a directory with a triage.toml")
    return case


def subgroup(app: typer.Typer, name: str, help: str) -> typer.Typer:
    """A group of subcommands under ``triage NAME`` (bare ``triage NAME`` shows its help)."""
    group = typer.Typer(help=help, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group
