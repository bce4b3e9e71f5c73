"""`triage record -- COMMAND` (the flight recorder) and `triage record-window` (cut a window)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from ..errors import InputError
from .common import console
from .options import CommandArg, JsonOpt, PolicyOpt, RanksOpt, RunIdOpt, TimeoutOpt
from .trace_cmd import launch_out_dir


def _settings(**kwargs):
    from ..fingerprint.recorder import RecorderSettings

    try:
        return RecorderSettings(**kwargs)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"invalid recorder setting {where}: {first['msg']}".rstrip(": ")) from None


def register(app: typer.Typer) -> None:
    @app.command(
        "record",
        context_settings={"allow_interspersed_args": False},
        help="Run COMMAND with the flight recorder in every process: module-level digests of "
        "every step, in a bounded ring of per-rank trace segments under --out. The command's "
        "exit code is passed through.",
    )
    def record(
        command: CommandArg,
        out: Annotated[
            Path | None,
            typer.Option("--out", help="recording directory (default: .triage/records/rec-<time>)"),
        ] = None,
        level: Annotated[
            str, typer.Option("--level", help="module | collective | sentinel")
        ] = "module",
        sentinel: Annotated[
            bool,
            typer.Option(
                "--sentinel",
                help="the always-on level: only each collective's buffers and the parameters "
                "the optimizer wrote, every step (same as --level sentinel)",
            ),
        ] = False,
        cap_mb: Annotated[
            float, typer.Option("--cap-mb", help="disk cap per rank, MiB (oldest steps go first)")
        ] = 256.0,
        ranks: RanksOpt = None,
        segment_mb: Annotated[
            float, typer.Option("--segment-mb", help="size at which a segment is closed, MiB")
        ] = 16.0,
        backend: Annotated[str, typer.Option("--backend", help="auto | native | python")] = "auto",
        side_stream: Annotated[
            bool, typer.Option("--side-stream", help="digest on a CUDA stream of its own")
        ] = False,
        run_id: RunIdOpt = "run",
        policy: PolicyOpt = None,
        timeout: TimeoutOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        from ..fingerprint import parse_ranks
        from ..fingerprint.recorder import record_command

        out_dir = launch_out_dir(command, out, "record", Path(".triage/records"), "rec")
        settings = _settings(
            out_dir=out_dir,
            cap_bytes=int(cap_mb * (1 << 20)),
            segment_bytes=int(segment_mb * (1 << 20)),
            level="sentinel" if sentinel else level,
            ranks=parse_ranks(ranks),
            run_id=run_id,
            backend=backend,
            side_stream=side_stream,
        )
        result = record_command(command, settings, policies=policy or [], timeout_s=timeout)
        if as_json:
            typer.echo(result.model_dump_json(indent=1))
        else:
            table = Table(title=f"recording of {' '.join(command)[:80]}")
            for col in ("rank", "segments", "MiB", "steps held"):
                table.add_column(col)
            for r in result.ranks:
                held = f"{r.steps[0]}-{r.steps[-1]}" if r.steps else "-"
                table.add_row(str(r.rank), str(r.segments), f"{r.bytes / (1 << 20):.2f}", held)
            console.print(table)
            console.print(f"recording: {result.out_dir}", markup=False)
            for w in result.warnings:
                console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
        code = result.capture.exit_code
        sys.exit(124 if code is None else code)

    @app.command("record-window")
    def record_window(
        recording: Annotated[Path, typer.Argument(help="a directory written by triage record")],
        steps: Annotated[str, typer.Option("--steps", help="the window, N or A-B")],
        out: Annotated[Path, typer.Option("--out", help="trace directory to write")],
    ) -> None:
        """Copy steps A-B of every rank's ring in RECORDING into OUT as one trace per rank
        (what `triage trace --steps A-B` would have written), for `triage compare`."""
        from ..fingerprint import parse_steps
        from ..fingerprint.recorder import window

        span = parse_steps(steps)
        if span is None:
            raise InputError("--steps is empty: give N or A-B")
        for path in window(recording, span, out):
            console.print(str(path), markup=False)

    @app.command("record-locate")
    def record_locate(
        recording_a: Annotated[Path, typer.Argument(help="run A's recording (--sentinel)")],
        recording_b: Annotated[Path, typer.Argument(help="run B's recording (--sentinel)")],
        as_json: JsonOpt = False,
    ) -> None:
        """The first step at which two sentinel recordings differ, the ranks that differ
        there and the ranks where the difference is made (not received through a
        collective), with no relaunch. Exit 0 when they agree on every step, 1 when not."""
        from ..compare.sentinel import locate

        found = locate(recording_a, recording_b)
        if as_json:
            typer.echo(found.model_dump_json(indent=1))
        else:
            if found.step is not None:
                table = Table(title=f"first divergent step {found.step}")
                for col in ("rank", "first differing record", "made here", "call site"):
                    table.add_column(col)
                for f in found.firsts:
                    table.add_row(
                        str(f.rank), f.record, "yes" if f.starts else "received", f.caller or "-"
                    )
                console.print(table)
            console.print(found.summary(), markup=False)
            for n in found.notes:
                console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
        sys.exit(0 if found.step is None else 1)

    @app.command("record-check")
    def record_check(
        recording: Annotated[Path, typer.Argument(help="one run's recording (--sentinel)")],
        as_json: JsonOpt = False,
    ) -> None:
        """Ranks of one recording whose all-reduced (broadcast, gathered) buffers or whole
        parameters differ from their peers' where every rank must hold the same bytes: a
        device suspect (silent data corruption). Exit 0 when none, 1 when any."""
        from ..compare.sentinel import device_suspects

        check = device_suspects(recording)
        if as_json:
            typer.echo(check.model_dump_json(indent=1))
        else:
            if check.suspects:
                table = Table(title="device suspects")
                for col in ("step", "rank", "record", "peers that agree", "why"):
                    table.add_column(col)
                for d in check.suspects:
                    table.add_row(
                        str(d.step), str(d.rank), d.record, ",".join(map(str, d.peers)), d.reason
                    )
                console.print(table)
            for t in check.ties:
                console.print(
                    f"step {t.step}: ranks {t.ranks} disagree on {t.record}; with two ranks "
                    "there is no majority to say which is wrong",
                    markup=False,
                )
            if not check.suspects and not check.ties:
                console.print(
                    f"no rank disagrees with its peers in {check.steps_read} steps", markup=False
                )
        sys.exit(1 if check.suspects or check.ties else 0)
