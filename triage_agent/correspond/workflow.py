"""Run a cross-framework case and compare its boundaries: the baselines of A and B (or B
rerun with interventions), their captures paired and compared, the table and the mapping
written where a reviewer reads them."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ..errors import InputError
from ..records import Case
from .boundaries import build_table
from .model import CompatTable, Mapping
from .table import markdown


class CorrespondResult(BaseModel):
    table: CompatTable
    mapping: Mapping
    a_dir: str
    b_dir: str
    metrics: str = ""
    b_seconds: float = 0.0


def run_case(
    case: Case, workspace: Path, interventions: list[str], *, subdir: str = "boundaries"
) -> CorrespondResult:
    from ..interventions import compare_runs, parse_intervention, rerun
    from ..runs import materialize_case

    ivs = [parse_intervention(t) for t in interventions]
    a, b = materialize_case(case, workspace)
    if ivs:
        b = rerun(case, "b", ivs, workspace=workspace, timeout_s=case.timeout_s)
        if not b.ok:
            raise InputError(f"rerun of b {b.error or 'failed'}")
    a_dir, b_dir = Path(a.out_dir) / subdir, Path(b.out_dir) / subdir
    for d in (a_dir, b_dir):
        if not (d / "side.json").is_file():
            raise InputError(f"no boundary capture at {d}: the run's launch must dump it there")
    table, mapping = build_table(a_dir, b_dir, intervention="; ".join(interventions) or None)
    return CorrespondResult(
        table=table,
        mapping=mapping,
        a_dir=str(a_dir),
        b_dir=str(b_dir),
        metrics=compare_runs(case, a, b).said(),
        b_seconds=b.seconds,
    )


def write_outputs(table: CompatTable, mapping: Mapping, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "table.json": table.model_dump_json(indent=1),
        "table.md": markdown(table),
        "mapping.json": mapping.model_dump_json(indent=1),
    }
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / n for n in files]
