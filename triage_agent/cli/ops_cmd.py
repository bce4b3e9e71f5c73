"""`triage ops build|locks`: DeepSpeed's JIT ops and the native tracer built ahead of time, and
dead build locks."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .common import console, err_console, subgroup


def register(app: typer.Typer) -> None:
    group = subgroup(app, "ops", "The just-in-time C++ ops: DeepSpeed's and the native tracer.")

    @group.command(
        "build",
        help="Build the ops runs load (DeepSpeed's shm allreduce and Adam, the native tracer) so "
        "no run's timeout pays for a first build. Cached builds only load.",
    )
    def build(
        op: Annotated[
            list[str] | None,
            typer.Option("--op", help="a DeepSpeed builder name (repeatable)"),
        ] = None,
    ) -> None:
        from ..extensions_dir import ninja_on_path
        from ..jit_ops import DEFAULT_OPS, build_ops, lock_notes

        with console.status("building ops", spinner="dots") as status:
            results, removed = build_ops(
                tuple(op) if op else DEFAULT_OPS, progress=lambda m: status.update(m)
            )
        for n in lock_notes(removed):
            err_console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
        t = Table(title=f"JIT ops ({len(results)})")
        for col in ("op", "status", "s", "detail"):
            t.add_column(col)
        colour = {"ready": "green", "skipped": "yellow", "failed": "red"}
        for r in results:
            detail = "" if r.status == "ready" else r.detail
            t.add_row(r.name, f"[{colour[r.status]}]{r.status}[/]", f"{r.seconds:.1f}", detail)
        console.print(t)
        typer.echo(f"{_root_line()}; ninja: {ninja_on_path()}")
        failed = [r for r in results if r.status == "failed"]
        if failed:
            err_console.print(
                f"[bold red]error:[/] {len(failed)} op(s) failed to build: "
                f"{failed[0].op}: {failed[0].detail}",
                highlight=False,
            )
            sys.exit(1)

    @group.command(
        "locks",
        help="List JIT build locks and DeepSpeed shm buffers; --clear removes those no process "
        "holds (every launch also does, and says so).",
    )
    def locks(
        clear: Annotated[bool, typer.Option("--clear", help="remove the dead ones")] = False,
    ) -> None:
        from ..jit_ops import clear_stale_locks, lock_files, stale_locks
        from ..shm_buffers import SHM_DIR, buffer_note, clear_dead_buffers, dead_buffers

        typer.echo(_root_line())
        every = lock_files()
        dead = {str(p) for p in stale_locks()}
        if not every:
            typer.echo("no build locks there")
        for p in every:
            state = "dead" if str(p) in dead else "held"
            typer.echo(f"{state}  {p}")  # whole paths, never wrapped
        buffers = dead_buffers()
        size = sum(p.stat().st_size for p in buffers if p.exists())
        typer.echo(
            f"{len(buffers)} dead DeepSpeed shm buffer(s) in {SHM_DIR} ({size / 2**20:.0f} MiB)"
        )
        if clear:
            removed = clear_stale_locks()
            typer.echo(f"removed {len(removed)} dead lock(s)")
            for n in buffer_note(*clear_dead_buffers()):
                typer.echo(n)


def _root_line() -> str:
    """The build root and why it is that one: the user's variable, or this environment's own."""
    from ..extensions_dir import extensions_root, extensions_root_source

    return f"build root: {extensions_root()} ({extensions_root_source()})"
