"""`triage manifest diff A B`: compare two state manifests (exit 0 equal, 1 different)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .common import console, subgroup
from .options import JsonOpt


def register(app: typer.Typer) -> None:
    group = subgroup(app, "manifest", "Checkpoint state manifests.")

    @group.command("diff")
    def diff(
        a: Annotated[Path, typer.Argument(help="manifest A (JSON)")],
        b: Annotated[Path, typer.Argument(help="manifest B (JSON)")],
        as_json: JsonOpt = False,
        limit: Annotated[int, typer.Option("--limit", min=1, help="rows shown")] = 50,
    ) -> None:
        """Say which tensors, scalars and RNG streams differ."""
        from ..manifest import diff_manifests, load_manifest

        d = diff_manifests(load_manifest(a), load_manifest(b))
        if as_json:
            typer.echo(d.model_dump_json(indent=1))
        elif d.equal:
            console.print(f"[green]equal[/]: {d.compared} entries compared")
        else:
            t = Table(title=f"{len(d.differences)} differing of {d.compared} compared")
            for col in ("section", "path", "reason", "A", "B"):
                t.add_column(col)
            for e in d.differences[:limit]:
                t.add_row(e.section, e.path, e.reason, (e.a or "")[:24], (e.b or "")[:24])
            console.print(t)
            for label, items in (("only in A", d.only_in_a), ("only in B", d.only_in_b)):
                if items:
                    console.print(
                        f"{label}: {', '.join(items[:limit])}", highlight=False, markup=False
                    )
        sys.exit(0 if d.equal else 1)
