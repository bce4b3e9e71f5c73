"""Run a cross-framework case and compare its boundaries: the baselines of A and B (or B
rerun with interventions), their captures paired and compared, optionally each differing
boundary's policy proven by the alignment loop, the table and the mapping written where a
reviewer reads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from ..errors import InputError
from ..records import Case
from ..runs import RunOutcome
from .align import AlignResult, Budget, align, capture_dir
from .boundaries import build_table
from .model import Alignment, CompatTable, Mapping
from .table import align_markdown, markdown


class CorrespondResult(BaseModel):
    table: CompatTable
    mapping: Mapping
    a_dir: str
    b_dir: str
    metrics: str = ""
    b_seconds: float = 0.0


def _baselines(
    case: Case, workspace: Path, interventions: list[str]
) -> tuple[RunOutcome, RunOutcome]:
    """A's baseline and B's, or B rerun with the interventions."""
    from ..interventions import parse_intervention, rerun
    from ..runs import materialize_case

    ivs = [parse_intervention(t) for t in interventions]
    a, b = materialize_case(case, workspace)
    if ivs:
        b = rerun(case, "b", ivs, workspace=workspace, timeout_s=case.timeout_s)
        if not b.ok:
            raise InputError(f"rerun of b {b.error or 'failed'}")
    return a, b


def run_case(
    case: Case, workspace: Path, interventions: list[str], *, subdir: str = "boundaries"
) -> CorrespondResult:
    from ..interventions import compare_runs

    a, b = _baselines(case, workspace, interventions)
    a_dir, b_dir = capture_dir(a, subdir), capture_dir(b, subdir)
    table, mapping = build_table(a_dir, b_dir, intervention="; ".join(interventions) or None)
    return CorrespondResult(
        table=table,
        mapping=mapping,
        a_dir=str(a_dir),
        b_dir=str(b_dir),
        metrics=compare_runs(case, a, b).said(),
        b_seconds=b.seconds,
    )


def align_case(
    case: Case,
    workspace: Path,
    interventions: list[str],
    *,
    budget: Budget | None = None,
    subdir: str = "boundaries",
    progress: Callable[[str], None] | None = None,
) -> AlignResult:
    """The case's A and B (B with ``interventions``), then the alignment loop on B."""
    a, b = _baselines(case, workspace, interventions)
    return align(
        case,
        workspace,
        capture_dir(a, subdir),
        capture_dir(b, subdir),
        interventions,
        budget=budget,
        subdir=subdir,
        progress=progress,
    )


def write_outputs(table: CompatTable | Alignment, mapping: Mapping, out: Path) -> list[Path]:
    """``table.json`` (the table, or the alignment with both tables and every attempt),
    ``table.md`` and ``mapping.json``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "table.json": table.model_dump_json(indent=1),
        "table.md": align_markdown(table) if isinstance(table, Alignment) else markdown(table),
        "mapping.json": mapping.model_dump_json(indent=1),
    }
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / n for n in files]
