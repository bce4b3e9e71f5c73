"""Run the probes over a bounded scope and rank what they find.

``run_scan(ScanRequest(...))`` is the single entry point for the CLI, the workflow and
the MCP server. Every file is parsed once; files that do not parse cleanly are still
scanned (tree-sitter recovers) and reported in ``parse_errors``; unreadable, binary and
non-UTF-8 files are listed in ``skipped`` with the reason. When the file or time budget
runs out the result says so in ``budget_hit``: a partial scan is never presented as whole.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from triage_agent.errors import InputError
from triage_agent.records import Finding, ReproducerSpec

from .engine import Engine
from .model import Category, Probe
from .rank import Phase, locality, score
from .registry import all_probes
from .scope import DEFAULT_EXCLUDES, SourceItem, from_around, from_diff, from_paths, module_name

Progress = Callable[[int, int, str], None]


class ScanRequest(BaseModel):
    """What to scan, how far, and for which mismatch phase."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        default_factory=list, description="files, directories or dotted modules"
    )
    diff: str | None = Field(default=None, description="REV_A..REV_B: scan only the hunks changed")
    repo: str | None = Field(
        default=None, description="git repository for --diff (default: first path or .)"
    )
    categories: list[Category] = Field(default_factory=list, description="empty: all categories")
    probes: list[str] = Field(default_factory=list, description="probe ids; empty: all")
    functions: list[str] = Field(
        default_factory=list, description="keep findings in these functions (Class.method or name)"
    )
    around: list[str] = Field(
        default_factory=list, description="FILE:LINE locations; scope becomes their windows"
    )
    window: int = Field(
        default=40, ge=0, le=100_000, description="lines each side of a location or hunk"
    )
    phase: Phase | None = None
    max_files: int | None = Field(default=None, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    max_file_bytes: int = Field(default=4_000_000, ge=1)
    exclude_globs: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDES))
    top_k: int | None = Field(default=None, ge=1)
    workers: int | None = Field(
        default=None, ge=1, le=64, description="processes; None: 1 for small scopes, else up to 4"
    )

    @field_validator("diff")
    @classmethod
    def _diff_shape(cls, v: str | None) -> str | None:
        if v is not None and v.count("..") != 1:
            raise ValueError("expected REV_A..REV_B")
        return v


class ParseIssue(BaseModel):
    file: str
    line: int | None
    message: str


class Skipped(BaseModel):
    file: str
    reason: str


class ScanResult(BaseModel):
    """Ranked findings plus an honest account of what was and was not scanned."""

    findings: list[Finding]
    total_findings: int = Field(description="findings before top_k truncation")
    files_scanned: int
    files_total: int
    lines: int
    seconds: float
    budget_hit: str | None = None
    parse_errors: list[ParseIssue] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    revision: str | None = Field(default=None, description="commit scanned, for --diff")
    phase: str | None = None
    probes: list[str] = Field(default_factory=list)
    workers: int = 1


def select_probes(req: ScanRequest) -> list[Probe]:
    probes = all_probes()
    known = {p.id for p in probes}
    unknown = [p for p in req.probes if p not in known]
    if unknown:
        raise InputError(f"unknown probe id(s) {unknown}; `triage scan --list-probes` lists them")
    if req.probes:
        probes = [p for p in probes if p.id in req.probes]
    if req.categories:
        probes = [p for p in probes if p.category in req.categories]
    return probes


def collect(req: ScanRequest) -> tuple[list[SourceItem], str | None]:
    if req.diff is not None:
        repo = req.repo or (req.paths[0] if req.paths else ".")
        return from_diff(req.diff, repo, req.paths, req.exclude_globs, req.window)
    if req.around:
        return from_around(req.around, req.window), None
    if not req.paths:
        raise InputError("nothing to scan: give paths, --diff REV_A..REV_B or --around FILE:LINE")
    return from_paths(req.paths, req.exclude_globs), None


def _in_functions(qualname: str | None, wanted: list[str]) -> bool:
    if qualname is None:
        return False
    return any(
        qualname == w or qualname.endswith("." + w) or qualname.startswith(w + ".") for w in wanted
    )


class _Outcome(BaseModel):
    """What scanning one file produced (crosses the worker-process boundary)."""

    findings: list[Finding] = Field(default_factory=list)
    parse_error: ParseIssue | None = None
    skipped: Skipped | None = None
    lines: int = 0


def _scan_item(engine: Engine, item: SourceItem, req: ScanRequest) -> _Outcome:
    if item.size > req.max_file_bytes:
        return _Outcome(
            skipped=Skipped(file=item.display, reason=f"larger than {req.max_file_bytes} bytes")
        )
    try:
        src = item.read()
    except OSError as exc:
        return _Outcome(
            skipped=Skipped(file=item.display, reason=f"unreadable: {exc.strerror or exc}")
        )
    if b"\0" in src[:8192]:
        return _Outcome(skipped=Skipped(file=item.display, reason="binary (NUL bytes)"))
    try:
        src.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _Outcome(skipped=Skipped(file=item.display, reason=f"not UTF-8 (byte {exc.start})"))
    unit = engine.parse(item.display, item.lang, src)
    out = _Outcome(lines=src.count(b"\n") + (0 if src.endswith(b"\n") or not src else 1))
    if unit.first_error_line is not None:
        out.parse_error = ParseIssue(
            file=item.display,
            line=unit.first_error_line,
            message="syntax error; tree-sitter recovered, findings near it may be missing",
        )
    for raw in engine.run(unit):
        h = raw.hit
        loc = locality(h.line_start, h.line_end, item.changed, item.windows, req.phase)
        if loc <= 0.0 or (
            item.changed is not None and not _near(h.line_start, h.line_end, item.windows)
        ):
            continue
        fname = raw.func.qualname if raw.func else None
        if req.functions and not _in_functions(fname, req.functions):
            continue
        p = raw.probe
        rep = None
        if p.template is not None:
            params = {**p.params, **h.params}
            mod = module_name(item) if "function" in params else None
            if mod:
                params["function"] = f"{mod}.{params['function']}"
            rep = ReproducerSpec(template=p.template, params=params)
        out.findings.append(
            Finding(
                probe_id=p.id,
                category=p.category.value,
                file=item.display,
                line_start=h.line_start,
                line_end=h.line_end,
                function=fname,
                snippet=unit.snippet(h.line_start, h.line_end),
                rationale=f"{p.rationale} {h.note}".strip(),
                severity=p.severity,
                score=score(p.severity, p.category, h.confidence, req.phase, loc),
                reproducer=rep,
            )
        )
    return out


# state handed to forked workers (set just before the pool starts, read-only afterwards)
_WORK: tuple[Engine, list[SourceItem], ScanRequest, float | None] | None = None


def _worker(indices: list[int]) -> list[tuple[int, _Outcome]]:
    if _WORK is None:
        raise RuntimeError("scan worker started without work")
    engine, items, req, deadline = _WORK
    done = []
    for i in indices:
        if deadline is not None and time.monotonic() >= deadline:
            break
        done.append((i, _scan_item(engine, items[i], req)))
    return done


def _workers_for(req: ScanRequest, n_items: int) -> int:
    if req.workers is not None:
        return req.workers
    if n_items < 200 or "fork" not in mp.get_all_start_methods():
        return 1  # a bounded scan is faster than starting processes
    return max(1, min(4, os.cpu_count() or 1))


def run_scan(req: ScanRequest, progress: Progress | None = None) -> ScanResult:
    """Scan ``req``'s scope with the selected probes; findings sorted by score, best first."""
    global _WORK
    t0 = time.monotonic()
    deadline = t0 + req.max_seconds if req.max_seconds is not None else None
    probes = select_probes(req)
    engine = Engine(probes)
    items, revision = collect(req)
    total = len(items)
    budget_hit: str | None = None
    todo = items[: req.max_files] if req.max_files is not None else items
    outcomes: dict[int, _Outcome] = {}
    workers = _workers_for(req, len(todo))
    if workers > 1:
        _WORK = (engine, todo, req, deadline)
        try:
            with mp.get_context("fork").Pool(workers) as pool:
                shards = [list(range(w, len(todo), workers)) for w in range(workers)]
                for part in pool.imap_unordered(_worker, shards):
                    for i, outcome in part:
                        # as the loop below reports: the files done before this one, its name
                        if progress is not None:
                            progress(len(outcomes), total, todo[i].display)
                        outcomes[i] = outcome
        finally:
            _WORK = None
    else:
        for i, item in enumerate(todo):
            if deadline is not None and time.monotonic() >= deadline:
                break
            if progress is not None:
                progress(i, total, item.display)
            outcomes[i] = _scan_item(engine, item, req)
    ordered = [outcomes[i] for i in sorted(outcomes)]
    skipped = [o.skipped for o in ordered if o.skipped is not None]
    scanned = len(ordered) - len(skipped)
    if len(outcomes) < len(todo):
        budget_hit = f"scanned {scanned}/{total} files, {req.max_seconds:g} s budget reached"
    elif len(todo) < total:
        budget_hit = f"scanned {scanned}/{total} files, {req.max_files}-file budget reached"
    findings = [f for o in ordered for f in o.findings]
    findings.sort(key=lambda f: (-f.score, f.file, f.line_start, f.probe_id))
    kept = findings[: req.top_k] if req.top_k else findings
    return ScanResult(
        findings=kept,
        total_findings=len(findings),
        files_scanned=scanned,
        files_total=total,
        lines=sum(o.lines for o in ordered),
        seconds=round(time.monotonic() - t0, 4),
        budget_hit=budget_hit,
        parse_errors=[o.parse_error for o in ordered if o.parse_error is not None],
        skipped=skipped,
        revision=revision,
        phase=req.phase,
        probes=[p.id for p in probes],
        workers=workers,
    )


def _near(a: int, b: int, windows: list[tuple[int, int, int]]) -> bool:
    return any(s <= b and a <= e for s, e, _ in windows)
