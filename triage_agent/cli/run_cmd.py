"""Placeholder: this command group is registered here once it exists."""

import typer


def register(app: typer.Typer) -> None:
    return None
