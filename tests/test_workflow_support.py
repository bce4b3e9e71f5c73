"""Shared builders for the workflow tests (no tests here): a case of two runs of one small
script, relaunched by the workflow."""

from __future__ import annotations

from pathlib import Path

from triage_agent.compare.result import Candidate
from triage_agent.records import Case, RunSpec


def script_case(tmp_path: Path, name: str, b_flag: str, files: dict[str, str]) -> Case:
    """Runs A and B of ``train.py`` (with its helper ``files``) in ``tmp_path/src``; B gets
    ``b_flag``. Each writes its metrics to the output directory the workflow gives it."""
    src = tmp_path / "src"
    src.mkdir()
    for file, text in files.items():
        (src / file).write_text(text)

    def run(run_name: str, *extra: str) -> RunSpec:
        launch = [["{python}", "train.py", "{out}", *extra]]
        return RunSpec(name=run_name, metrics="{out}", cwd=str(src), launch=launch)

    return Case(
        name=name,
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a"),
        run_b=run("b", b_flag),
        timeout_s=120,
    )


def extra_call(
    call_site: str, *, step: int, event: str, event_kind: str, phase: str, order: float
) -> Candidate:
    """An event only run B executes, that writes state, made at ``call_site``."""
    return Candidate(
        kind="extra",
        run="b",
        rank=0,
        step=step,
        event=event,
        event_kind=event_kind,
        phase=phase,
        call_site=call_site,
        writes_state=True,
        order=order,
    )
