"""Tools over the static probes: list them, run a bounded scan and record its findings."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, Field

from probes.model import Category
from probes.rank import Phase
from probes.scan import ScanRequest, ScanResult
from triage_agent.errors import InputError
from triage_agent.paths import split_rev_range

from .security import MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_PATH_CHARS, Workspace
from .spec import In, Progress


# -- probes ----------------------------------------------------------------------------------
class ListProbesIn(In):
    category: str | None = Field(default=None, max_length=MAX_NAME_CHARS, description="filter")


class ProbeInfo(BaseModel):
    id: str
    category: str
    severity: str
    title: str
    rationale: str
    template: str | None = Field(description="the reproducer template that tests its findings")
    lang: str
    references: list[str]


class ProbesOut(BaseModel):
    probes: list[ProbeInfo]


def list_probes(ws: Workspace, args: ListProbesIn, progress: Progress) -> ProbesOut:
    """List the static-scan probes: what each looks for, why it matters for bitwise
    agreement, and which reproducer template can test its findings."""
    from probes.registry import all_probes

    return ProbesOut(
        probes=[
            ProbeInfo(**p.model_dump(include=set(ProbeInfo.model_fields)))
            for p in all_probes()
            if args.category is None or p.category == args.category
        ]
    )


_REQUEST = ScanRequest.model_fields


class ScanIn(In):
    paths: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="files, directories or dotted modules inside the allowed roots or the "
        "installed source of a framework the case imports (read-only roots); default: the "
        "case's scan_paths (else its source roots), then those frameworks",
    )
    diff: str | None = Field(
        default=None, max_length=401, description="REV_A..REV_B: scan only the changed hunks"
    )
    repo: str | None = Field(default=None, max_length=MAX_PATH_CHARS, description="for diff")
    # the library's fields (defaults, descriptions), a tool call held to shorter lists
    around: Annotated[list[str], Field(max_length=100)] = _REQUEST["around"]
    window: Annotated[int, Field(le=5000)] = _REQUEST["window"]
    categories: Annotated[list[Category], Field(max_length=20)] = _REQUEST["categories"]
    probes: Annotated[list[str], Field(max_length=200)] = _REQUEST["probes"]
    functions: Annotated[list[str], Field(max_length=100)] = _REQUEST["functions"]
    phase: Phase | None = Field(default=None, description="the mismatch phase, for ranking")
    max_files: int = Field(default=2000, ge=1, le=50_000, description="file budget")
    max_seconds: float = Field(default=30.0, gt=0, le=600, description="time budget")
    top_k: int = Field(default=50, ge=1, le=MAX_LIST_ITEMS, description="findings kept")
    record: bool = Field(default=True, description="record the kept findings in the ledger")


class ScanOut(BaseModel):
    result: ScanResult = Field(description="ranked findings and what was not scanned, and why")
    recorded: int = Field(description="findings appended to the ledger")


def _contained_module_or_path(ws: Workspace, raw: str) -> str:
    from probes.scope import resolve_module

    p = ws.absolute(raw)
    if not os.path.exists(p) and "/" not in raw and raw.replace(".", "").replace("_", "").isalnum():
        mod = resolve_module(raw)
        if mod is not None:
            p = mod
    return str(ws.read_tree(p))


def scan(ws: Workspace, args: ScanIn, progress: Progress) -> ScanOut:
    """Bounded static scan with the probes: explicit paths, the hunks changed between two git
    revisions, or windows around FILE:LINE locations; within a file budget and a time budget.
    Findings are ranked for the mismatch phase (pass one of confirm_mismatch's report.phases)
    and recorded in the ledger. They are
    hypotheses to test, never verdicts; a budget hit is reported, never hidden."""
    from probes.scan import ScanRequest, run_scan

    case = ws.case
    paths = [_contained_module_or_path(ws, p) for p in args.paths]
    around = []
    for spec in args.around:
        file, sep, line = spec.rpartition(":")
        if not sep:
            raise InputError(f"invalid location {spec!r}: expected FILE:LINE")
        around.append(f"{ws.read_path(file, must_exist=True)}:{line}")
    repo = None
    if args.diff is not None:
        a, b = split_rev_range(args.diff)
        repo_arg = args.repo or (
            paths[0]
            if paths
            else (case.run_b.source.repo if case and case.run_b.source else str(ws.root))
        )
        repo = str(ws.path(repo_arg, must_exist=True))
        ws.rev(repo, a), ws.rev(repo, b)
    elif not paths and not around:
        if case is None:
            raise InputError("nothing to scan: give paths, diff or around (or open a case)")
        # the case's own code first, then the installed frameworks its scripts import, as
        # the headless workflow scans them
        paths = [str(ws.tree(p)) for p in (case.scan_paths or case.source_roots)]
        paths += [str(ws.read_tree(p)) for p in ws.framework_roots()]
    req = ScanRequest(
        paths=paths,
        diff=args.diff,
        repo=repo,
        around=around,
        window=args.window,
        categories=args.categories,
        probes=args.probes,
        functions=args.functions,
        phase=args.phase,
        max_files=args.max_files,
        max_seconds=args.max_seconds,
        top_k=args.top_k,
        **({"exclude_globs": case.exclude_globs} if case else {}),
    )
    result = run_scan(req, lambda i, n, what: progress(i, n, what))
    progress(result.files_scanned, result.files_total, result.budget_hit or "scan complete")
    if args.record:
        for f in result.findings:
            ws.ledger.add_finding(f)
        ws.ledger.note(
            f"scan: {result.files_scanned}/{result.files_total} files, "
            f"{result.total_findings} findings ({len(result.findings)} kept)"
            + (f"; {result.budget_hit}" if result.budget_hit else ""),
            source="mcp",
        )
    return ScanOut(result=result, recorded=len(result.findings) if args.record else 0)
