"""`triage trace [options] -- COMMAND...`: trace an unmodified training command."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InputError
from .common import console
from .options import CommandArg, JsonOpt, PolicyOpt, RanksOpt, RunIdOpt, TimeoutOpt


def launch_out_dir(
    command: list[str], out: Path | None, verb: str, root: Path, prefix: str
) -> Path:
    """OUT, or a new directory under ROOT named for now; a missing COMMAND is bad input."""
    if not command:
        raise InputError(f"no command to {verb}: give it after '--', e.g. -- python train.py")
    return out if out is not None else root / time.strftime(f"{prefix}-%Y%m%dT%H%M%S")


def register(app: typer.Typer) -> None:
    @app.command(
        "trace",
        context_settings={"allow_interspersed_args": False},
        help="Trace every rank of COMMAND (deepspeed, torchrun or python) and write one "
        "JSONL trace per rank. The command's exit code is passed through.",
    )
    def trace(
        command: CommandArg,
        steps: Annotated[
            str | None,
            typer.Option(
                "--steps",
                help="step window, N, A-B or init-B; init is what runs before the first "
                "step, traced with any window from 0 (default: all)",
            ),
        ] = None,
        step_function: Annotated[
            str | None,
            typer.Option(
                "--step-function",
                help="pkg.mod:qualname (or __main__:name) whose calls begin the steps "
                "(default: the job's MetricLog.log calls, else its optimizer)",
            ),
        ] = None,
        level: Annotated[
            str, typer.Option("--level", help="none | collective | module | op")
        ] = "module",
        scope: Annotated[
            str | None, typer.Option("--scope", help="regex over module scopes")
        ] = None,
        ranks: RanksOpt = None,
        out: Annotated[
            Path | None,
            typer.Option(
                "--out", help="trace directory (default: a new .triage/traces/run-<time>)"
            ),
        ] = None,
        dump: Annotated[
            list[str] | None,
            typer.Option("--dump", help="save whole tensors of events matching this pattern"),
        ] = None,
        digest: Annotated[str, typer.Option("--digest", help="xor | order | both")] = "xor",
        run_id: RunIdOpt = "run",
        policy: PolicyOpt = None,
        timeout: TimeoutOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        from ..fingerprint import CaptureConfig, capture_command, parse_ranks, parse_steps

        config = CaptureConfig(
            out_dir=launch_out_dir(command, out, "trace", Path(".triage/traces"), "run"),
            steps=parse_steps(steps),
            level=level,
            scope=scope,
            ranks=parse_ranks(ranks),
            dump=dump or [],
            digest=digest,
            run_id=run_id,
            policies=policy or [],
            step_function=step_function,
        )
        result = capture_command(command, config, timeout_s=timeout)
        if as_json:
            typer.echo(result.model_dump_json(indent=1))
        else:
            table = Table(title=f"trace of {' '.join(command)[:80]}")
            for col in ("file", "rank", "steps", "events", "complete", "sha256"):
                table.add_column(col)
            for f in result.files:
                st = f"{f.steps[0]}-{f.steps[-1]}" if f.steps else "-"
                table.add_row(
                    Path(f.path).name,
                    str(f.rank),
                    st,
                    str(f.events),
                    str(f.complete),
                    f.sha256[:12],
                )
            console.print(table)
            console.print(f"out dir: {result.out_dir}   logs: {result.stderr_log}", markup=False)
            for w in result.warnings:
                console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
        code = result.exit_code
        sys.exit(124 if code is None else code)

    from . import manifest_cmd

    manifest_cmd.register(app)
