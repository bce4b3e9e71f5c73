"""`triage run`, `triage demo`, `triage report`: the headless workflow and what it leaves."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..compare.distributed import Executor
from ..config import load_case
from ..ledger import Ledger
from ..ledger_view import action_text, verdict_basis
from .common import console, err_console
from .compare_cmd import BareRayCommand, RayOpt, WorkersOpt
from .options import CaseOpt, WorkspaceOpt

if TYPE_CHECKING:
    from ..workflow.timing import StageTime

DEMO_DIR = "demo-case"


def _demo_case(workspace: Path) -> Path:
    from reproducers.demo.case import write_demo_case

    dest = workspace / DEMO_DIR
    if not (dest / "triage.toml").exists():
        write_demo_case(dest)
    return dest / "triage.toml"


def run(
    mismatch_step: Annotated[
        int | None,
        typer.Option(
            "--mismatch-step", help="First step whose metric bits differ; detected when omitted."
        ),
    ] = None,
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
    budget_minutes: Annotated[
        float, typer.Option("--budget-minutes", help="Stop starting new work after this long.")
    ] = 30.0,
    max_hypotheses: Annotated[
        int, typer.Option("--max-hypotheses", help="Test at most K hypotheses from the scan.")
    ] = 3,
    no_confirm_trace: Annotated[
        bool,
        typer.Option(
            "--no-confirm-trace",
            help="Skip the confirming trace when stage 1 supports a hypothesis.",
        ),
    ] = False,
    report: Annotated[
        bool,
        typer.Option("--report/--no-report", help="Write report.md and report.html at the end."),
    ] = True,
    ray: RayOpt = None,
    workers: WorkersOpt = 1,
) -> None:
    """Run the two-stage workflow on the case (the embedded DeepSpeed demo when there is none)."""
    from ..workflow.engine import run_workflow
    from ..workflow.options import RunOptions

    cfg = load_case(case)
    if cfg is None:
        ws = workspace or Path(".triage")
        ws.mkdir(parents=True, exist_ok=True)
        path = _demo_case(ws)
        console.print(f"no triage.toml here: running the embedded demo case ({path})", markup=False)
        cfg = load_case(path)
        cfg.workspace = str(ws.resolve())
    elif workspace is not None:
        cfg.workspace = str(workspace.resolve())
    ledger = Ledger(cfg.workspace)
    opts = RunOptions(
        mismatch_step=mismatch_step,
        budget_minutes=budget_minutes,
        max_hypotheses=max_hypotheses,
        confirm_trace=not no_confirm_trace,
        timeout_s=cfg.timeout_s,
        executor=Executor(workers=workers, ray=ray),
    )
    t0 = time.monotonic()
    state = {"stage": "start", "msg": ""}

    def render() -> Text:
        el = time.monotonic() - t0
        return Text.assemble(
            ("⠿ ", "cyan"), (f"{state['stage']:<9}", "bold"), f" {el:6.1f}s  ", state["msg"][:100]
        )

    with Live(render(), console=console, refresh_per_second=4, transient=True) as live:

        def status(stage: str, msg: str) -> None:
            if stage != state["stage"]:
                console.print(
                    f"[dim]{time.monotonic() - t0:6.1f}s[/] [bold]{stage}[/]: {escape(msg)}"
                )
            state.update(stage=stage, msg=msg)
            live.update(render())

        try:
            result = run_workflow(cfg, ledger, opts, status)
        except KeyboardInterrupt:
            # Every record is already durable; say where we stopped and how to go on.
            ledger.note(f"interrupted during {state['stage']}: {state['msg']}", level="warning")
            live.stop()
            err_console.print(
                f"[yellow]interrupted[/] during {state['stage']}: the ledger holds everything "
                "recorded so far; run `triage run` again to resume"
            )
            raise typer.Exit(130) from None
    mm = result.mismatch
    if mm is not None:
        style = "bold red" if mm.given_step_wrong else "bold"
        console.print(f"[{style}]{escape(mm.message)}[/]")
        for fact in mm.facts:
            console.print(f"  - {fact}", markup=False)
    incomplete = mm is not None and mm.step is None and not mm.diff.complete
    if result.verdict is None and incomplete:
        console.print("[yellow]no divergence in what both runs hold, but they are incomplete[/]")
    elif result.verdict is None:
        console.print("[green]no divergence to explain[/]")
    if result.verdict is None:
        for n in ledger.state().notes:
            if n.get("caveat"):
                console.print(f"[yellow]caveat:[/] {escape(n['text'])}")
    else:
        v = result.verdict
        t = Table(show_header=False, title=f"verdict after {result.seconds:.0f} s")
        t.add_row("classification", f"[bold]{v.classification.value}[/]")
        t.add_row("statement", v.statement)
        t.add_row("location", v.location or "-")
        t.add_row("evidence", ", ".join(v.evidence))
        basis = verdict_basis(ledger.state())
        if basis is not None:
            t.add_row("basis", basis.text)
        t.add_row("next action", action_text(v.next_action) or "-")
        for caveat in v.caveats:
            t.add_row("[yellow]caveat[/]", escape(caveat))
        console.print(t)
    if result.stages:
        console.print(_stage_table(result.stages))
    if report:
        from ..report import write_report

        paths = write_report(ledger, Path(cfg.workspace))
        console.print(f"report: {paths.markdown} and {paths.html}", markup=False)
    if result.verdict is None and incomplete:
        raise typer.Exit(3)


def _stage_table(times: list[StageTime]) -> Table:
    t = Table(title="where the time went")
    t.add_column("stage")
    t.add_column("seconds", justify="right")
    t.add_column("launches", justify="right")
    for s in times:
        t.add_row(s.stage, f"{s.seconds:.1f}", str(s.launches))
    total = sum(s.seconds for s in times)
    t.add_row("[bold]total[/]", f"[bold]{total:.1f}[/]", str(sum(s.launches for s in times)))
    return t


def demo(
    dest: Annotated[Path, typer.Argument(help="Directory to write the demo case into.")] = Path(
        "triage-demo"
    ),
    gpu: Annotated[
        bool,
        typer.Option(
            "--gpu", help="The CUDA run-to-run case instead of the DeepSpeed resume case."
        ),
    ] = False,
) -> None:
    """Write a demo case out so it can be inspected, edited and run."""
    if gpu:
        from reproducers.demo_gpu.case import write_gpu_case as write
    else:
        from reproducers.demo.case import write_demo_case as write

    path = write(dest)
    console.print(f"wrote {path}; run it with: cd {dest} && triage run", markup=False)


def report_cmd(
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for report.md and report.html.")
    ] = None,
) -> None:
    """Write the reviewer's report (Markdown and a self-contained HTML page)."""
    from ..report import write_report
    from .common import existing_ledger_for

    ledger = existing_ledger_for(case, workspace)  # a typo in -w is an error, not an empty report
    paths = write_report(ledger, out or ledger.workspace)
    console.print(f"wrote {paths.markdown} and {paths.html}", markup=False)


def next_cmd(
    case: CaseOpt = None,
    workspace: WorkspaceOpt = None,
    mismatch_step: Annotated[
        int | None,
        typer.Option(
            "--mismatch-step", help="First step whose metric bits differ; detected when omitted."
        ),
    ] = None,
) -> None:
    """What `triage run` would do next: the chooser's ranked moves, each with why. Launches
    nothing (the baselines must have run)."""
    from ..workflow.engine import suggest_next
    from ..workflow.options import RunOptions
    from .common import existing_ledger_for

    ledger = existing_ledger_for(case, workspace)
    cfg = ledger.state().case or load_case(case)
    if cfg is None:
        err_console.print("no case: give --case FILE, or run `triage run` here first")
        raise typer.Exit(2)
    out = suggest_next(cfg, ledger, RunOptions(mismatch_step=mismatch_step))
    console.print(out.said, markup=False)
    if not out.suggestions:
        return
    t = Table(title="next moves, best first")
    for col in ("#", "move", "why", "value", "waits"):
        t.add_column(col, overflow="fold")
    for s in out.suggestions:
        t.add_row(str(s.rank), s.move, s.why, f"{s.value:.4f}", s.waits or "")
    console.print(t)


def register(app: typer.Typer) -> None:
    app.command("run", cls=BareRayCommand)(run)
    app.command("next")(next_cmd)
    app.command("demo")(demo)
    app.command("report")(report_cmd)
