"""`triage reproduce list|generate|launch|replay`: thin wrappers over ``reproducers``."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ..config import load_case
from ..errors import InputError
from ..evidence_data import ReproducerData
from ..ledger import Ledger
from ..records import Evidence
from .common import console, ledger_for, workspace_for
from .options import CaseOpt, WorkspaceOpt

repro_app = typer.Typer(
    help="Generate, launch and replay small discriminating reproducers.", no_args_is_help=True
)


class Format(StrEnum):
    table = "table"
    json = "json"


class LauncherName(StrEnum):
    python = "python"
    torchrun = "torchrun"
    deepspeed = "deepspeed"


FormatOpt = Annotated[
    Format, typer.Option("--format", "-f", help="table for people, json for programs")
]


def _print_evidence(ev: Evidence, fmt: Format) -> None:
    from ..ledger_view import commands_text

    if fmt == Format.json:
        typer.echo(ev.model_dump_json(indent=2))
        return
    colors = {"supported": "green", "refuted": "red", "inconclusive": "yellow", "error": "bold red"}
    console.print(
        f"[{colors.get(ev.result.value, 'white')}]{ev.result.value}[/] {ev.summary}",
        highlight=False,
    )
    console.print(f"evidence {ev.id} recorded; {ev.duration_s} s", highlight=False, markup=False)
    # never wrapped by the console: the line is for copying into a shell
    console.print(
        f"to reproduce: {commands_text(ev.argv)}", highlight=False, markup=False, soft_wrap=True
    )
    out = ev.data_as(ReproducerData).output or {}
    if out.get("details"):
        console.print_json(json.dumps(out["details"], default=str))


@repro_app.command("list")
def list_cmd(format: FormatOpt = Format.table) -> None:
    """Template ids, what each tests, what 'supported' means, and its parameters."""
    from reproducers.generator import list_templates

    rows = list_templates()
    if format == Format.json:
        typer.echo(
            json.dumps({"schema": "triage.templates/1", "templates": rows}, indent=2, default=str)
        )
        return
    table = Table(title="reproducer templates")
    for col in ("template", "tests", "supported means", "parameters (default)", "runs on"):
        table.add_column(col, overflow="fold")
    for r in rows:
        params = "\n".join(f"{k}={v['default']!r}" for k, v in r["params"].items())
        where = {"never": "CPU", "param": "CPU or GPU", "always": "GPU"}[r["needs_gpu"]]
        if r["uses_deepspeed"]:
            where += " + DeepSpeed"
        table.add_row(r["template"], r["tests"], r["supported_means"], params, where)
    console.print(table)


@repro_app.command("generate")
def generate_cmd(
    template: Annotated[
        str | None, typer.Argument(help="template id (see `triage reproduce list`)")
    ] = None,
    params: Annotated[
        str | None,
        typer.Option("--params", "-p", help="parameters: inline JSON object or a JSON file"),
    ] = None,
    finding: Annotated[
        str | None,
        typer.Option("--finding", help="a recorded finding or hypothesis id naming its template"),
    ] = None,
    format: FormatOpt = Format.table,
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Write a reproducer into the workspace, record it in the ledger, print its id and path."""
    from reproducers.generator import generate, parse_params_arg

    ledger = ledger_for(case, workspace)
    source: Any
    if finding is not None:
        if template is not None or params is not None:
            raise InputError(
                "--finding takes its template and parameters from the record: drop TEMPLATE/--params"
            )
        state = ledger.state()
        source = state.findings.get(finding) or state.hypotheses.get(finding)
        if source is None:
            raise InputError(f"no finding or hypothesis {finding!r} in {ledger.path}")
    elif template is None:
        raise InputError("give a TEMPLATE (see `triage reproduce list`) or --finding ID")
    else:
        source = {"template": template, "params": parse_params_arg(params)}
    # the case's directories are where a template that imports its code looks by default
    opened = load_case(case) or ledger.state().case
    gen = generate(source, ledger.workspace, case=opened, ledger=ledger)
    if format == Format.json:
        typer.echo(gen.model_dump_json(indent=2))
        return
    typer.echo(gen.id)
    console.print(
        f"{gen.path}  ({gen.template}, params {json.dumps(gen.params, sort_keys=True)})",
        highlight=False,
    )
    if gen.needs_gpu:
        console.print("[yellow]note:[/] this reproducer needs a CUDA device")


@repro_app.command("launch")
def launch_cmd(
    reproducer_id: Annotated[
        str, typer.Argument(metavar="ID", help="id printed by `triage reproduce generate`")
    ],
    ranks: Annotated[
        int, typer.Option("--ranks", "-n", help="processes for torchrun/deepspeed")
    ] = 1,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="seconds (default: per template)")
    ] = None,
    launcher: Annotated[
        LauncherName, typer.Option("--launcher", help="python, torchrun or deepspeed")
    ] = (LauncherName.python),
    deterministic: Annotated[
        bool,
        typer.Option("--deterministic/--no-deterministic", help="set the deterministic env vars"),
    ] = False,
    hypothesis: Annotated[
        list[str] | None,
        typer.Option("--hypothesis", "-H", help="hypothesis id this tests (repeatable)"),
    ] = None,
    format: FormatOpt = Format.table,
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Run a recorded reproducer; print its result and record the Evidence (exit 1 on error)."""
    from reproducers.launcher import EnvPolicy, launch

    ws = workspace_for(case, workspace)
    Ledger(ws).require_hypotheses(list(hypothesis or []))
    if launcher == LauncherName.python and ranks > 1:
        launcher = LauncherName.torchrun
    with console.status(f"running {reproducer_id} ({launcher.value}, {ranks} rank(s))"):
        ev = launch(
            reproducer_id,
            ws,
            ranks=ranks,
            launcher=launcher.value,  # type: ignore[arg-type]
            timeout_s=timeout,
            env_policy=EnvPolicy(deterministic=deterministic),
            hypotheses=list(hypothesis or []),
        )
    _print_evidence(ev, format)
    if ev.result.value == "error":
        raise typer.Exit(1)


@repro_app.command("replay")
def replay_cmd(
    dump: Annotated[Path, typer.Argument(help="a tensor dump (.pt) written by the tracer")],
    repeats: Annotated[int, typer.Option("--repeats", "-r", help="runs of the op")] = 5,
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", help="non-tensor argument NAME=JSON (repeatable), e.g. dim=0"),
    ] = None,
    deterministic: Annotated[
        bool | None,
        typer.Option(
            "--deterministic/--no-deterministic", help="change torch.use_deterministic_algorithms"
        ),
    ] = None,
    stream: Annotated[str, typer.Option("--stream", help="default or side (CUDA)")] = "default",
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="cast floating inputs to this dtype")
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="move inputs to this device")
    ] = None,
    hypothesis: Annotated[
        list[str] | None, typer.Option("--hypothesis", "-H", help="hypothesis id")
    ] = None,
    format: FormatOpt = Format.table,
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Rerun a dumped op N times under one changed policy; record a replay Evidence."""
    from reproducers.replay import ReplayPolicy, replay_dump

    if stream not in ("default", "side"):
        raise InputError(f"--stream must be default or side, got {stream!r}")
    extra: dict[str, Any] = {}
    for item in arg or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise InputError(f"--arg {item!r}: expected NAME=JSON, e.g. dim=0")
        try:
            extra[name] = json.loads(value)
        except json.JSONDecodeError:
            raise InputError(f"--arg {item!r}: the value is not JSON") from None
    ws = workspace_for(case, workspace)
    Ledger(ws).require_hypotheses(list(hypothesis or []))
    policy = ReplayPolicy(deterministic=deterministic, stream=stream, dtype=dtype, device=device)  # type: ignore[arg-type]
    ev = replay_dump(
        dump, ws, repeats, policy, list(hypothesis or []), extra, roots=[ws, Path.cwd()]
    )
    if format == Format.json:
        typer.echo(ev.model_dump_json(indent=2))
    else:
        console.print(f"[cyan]observed[/] {escape(ev.summary)}", highlight=False)
        console.print(f"evidence {ev.id} recorded", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(repro_app, name="reproduce")
