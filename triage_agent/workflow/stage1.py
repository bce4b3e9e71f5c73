"""Stage 1: a bounded static scan shaped by the characterisation, findings -> hypotheses ->
generated reproducers -> execution evidence. A hypothesis becomes `supported` only through
a reproducer's result, never through the scan."""

from __future__ import annotations

import ast
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import TriageError
from ..evidence_data import StaticData
from ..ledger import Ledger
from ..ledger_rules import BY_LATEST_TEST
from ..records import (
    Case,
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Finding,
    Hypothesis,
    HypothesisStatus,
)
from .characterize import MismatchReport
from .classify import CLASSIFICATION
from .markers import done_for

# Frameworks whose installed source is in scope when a run's scripts import them.
FRAMEWORKS = ("deepspeed", "megatron", "apex", "transformer_engine")
PHASE_ORDER = ("update", "resume", "first-step", "first-update", "gas-boundary", "multi-rank")
# The probes rank by the phases they know; the first update is judged like the first step
# (initialisation and the first optimizer step are what it can differ in).
SCAN_PHASE = {"first-update": "first-step"}


class Stage1Result(BaseModel):
    scanned: str
    findings: int
    hypotheses: list[str] = Field(default_factory=list)
    supported: list[str] = Field(default_factory=list)


def _imports_of(script: Path) -> set[str]:
    try:
        tree = ast.parse(script.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _called_names(script: Path) -> set[str]:
    try:
        tree = ast.parse(script.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute):
                names.add(fn.attr)
            elif isinstance(fn, ast.Name):
                names.add(fn.id)
    return names


def _case_scripts(case: Case) -> list[Path]:
    out = []
    for run in (case.run_a, case.run_b):
        cwd = Path(run.cwd or ".")
        out += [
            cwd / a
            for argv in run.launch
            for a in argv
            if a.endswith(".py") and (cwd / a).is_file()
        ]
    return sorted(set(out))


def called_from_case(case: Case) -> set[str]:
    """Names the case's own scripts call: framework sites they reach by name rank first."""
    names: set[str] = set()
    for script in _case_scripts(case):
        names |= _called_names(script)
    return names


def rerank(findings: list[Finding], called: set[str]) -> list[Finding]:
    """Stable re-rank: a finding in a function the case's scripts call directly gets +0.5."""

    def key(f: Finding) -> float:
        fn = (f.function or "").rsplit(".", 1)[-1]
        return -(f.score + (0.5 if fn in called else 0.0))

    return sorted(findings, key=key)


# A scan path may be a whole tree: its imports are read from this many files at most.
MAX_IMPORT_FILES = 2000


def _scan_path_scripts(case: Case) -> list[Path]:
    """The Python files under the case's scan paths (a file, or a directory's tree)."""
    out: list[Path] = []
    for sp in case.scan_paths:
        p = Path(sp)
        if p.is_file() and p.suffix == ".py":
            out.append(p)
        elif p.is_dir():
            out += sorted(p.rglob("*.py"))[: MAX_IMPORT_FILES - len(out)]
    return out[:MAX_IMPORT_FILES]


def framework_paths(case: Case) -> list[str]:
    """Installed framework packages that the runs' scripts or the case's scan paths import
    (or that the runs launch): the job's own library often is what imports the framework."""
    wanted: set[str] = set()
    for run in (case.run_a, case.run_b):
        if any(Path(a).name == "deepspeed" for argv in run.launch for a in argv):
            wanted.add("deepspeed")
    for script in [*_case_scripts(case), *_scan_path_scripts(case)]:
        wanted |= _imports_of(script) & set(FRAMEWORKS)
    out = []
    for name in sorted(wanted):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            out.append(next(iter(spec.submodule_search_locations)))
    return out


def _scannable(path: str) -> bool:
    from probes.unit import lang_for

    p = Path(path)
    return p.is_dir() or lang_for(p.name) is not None


def scan_request(case: Case, rep: MismatchReport, max_seconds: float = 20.0):
    from probes.scan import DEFAULT_EXCLUDES, ScanRequest

    phase = next((p for p in PHASE_ORDER if p in rep.phases), None)
    phase = SCAN_PHASE.get(phase, phase) if phase else None
    if rep.source_differs and case.run_a.source and case.run_b.source:
        a, b = case.run_a.source, case.run_b.source
        return ScanRequest(
            paths=[b.repo],
            repo=b.repo,
            diff=f"{a.rev or 'HEAD'}..{b.rev or 'HEAD'}",
            phase="update",
            max_seconds=max_seconds,
            exclude_globs=[*DEFAULT_EXCLUDES, *case.exclude_globs],
        )
    # The case's own code first, then the installed frameworks its scripts import. A scan
    # path may name a config the job reads (JSON, YAML): the scan reads source, and the
    # config's keys reach the workflow as declared differences instead.
    own = [p for p in case.scan_paths if _scannable(p)] or case.source_roots
    paths = [*own, *framework_paths(case)]
    return ScanRequest(
        paths=paths,
        phase=phase,
        max_seconds=max_seconds,
        exclude_globs=[*DEFAULT_EXCLUDES, *case.exclude_globs],
    )


def hypotheses_from_findings(findings: list[Finding], k: int) -> list[Hypothesis]:
    """Group testable findings by the reproducer that would test them; keep the top ``k``."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:  # already ranked
        if f.reproducer is None:
            continue
        key = f"{f.category}|{f.reproducer.template}|{json.dumps(f.reproducer.params, sort_keys=True)}"
        groups.setdefault(key, []).append(f)
    from probes.registry import get_probe

    hyps = []
    for group in list(groups.values())[:k]:
        top = group[0]
        where = f"{top.file}:{top.line_start}" + (f" in {top.function}" if top.function else "")
        more = f" (+{len(group) - 1} similar site(s))" if len(group) > 1 else ""
        hyps.append(
            Hypothesis(
                statement=f"{get_probe(top.probe_id).title}: {where}{more}",
                rationale=top.rationale,
                category=top.category,
                findings=[f.id for f in group],
                reproducer=top.reproducer,
                classification=CLASSIFICATION.get(top.category, Classification.unknown),
            )
        )
    return hyps


def test_hypothesis(
    ledger: Ledger, case: Case, hyp: Hypothesis, finding: Finding, timeout_s: float
) -> Evidence:
    from reproducers.generator import generate
    from reproducers.launcher import launch

    try:
        gen = generate(finding, Path(ledger.workspace), case=case, ledger=ledger)
        ev = launch(gen, Path(ledger.workspace), timeout_s=timeout_s, hypotheses=[hyp.id])
    except TriageError as exc:
        # A template that cannot be built for this finding is an error result, not a crash.
        ev = ledger.add_evidence(
            Evidence(
                hypotheses=[hyp.id],
                kind=EvidenceKind.reproducer,
                result=EvidenceResult.error,
                summary=f"no reproducer could be run for {finding.probe_id}: {exc}",
            )
        )
    ledger.update_hypothesis(
        hyp.id,
        status=_STATUS.get(ev.result, HypothesisStatus.inconclusive),
        reason=BY_LATEST_TEST,
    )
    return ev


def run_stage1(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    *,
    max_hypotheses: int,
    timeout_s: float,
    deadline: float | None = None,
    on_status: Callable[[str], None] = lambda s: None,
) -> Stage1Result:
    import time

    from probes.scan import run_scan

    state = ledger.state()
    if done_for(state, "scan", rep.step) is None:
        req = scan_request(case, rep)
        on_status(
            f"scanning {len(req.paths)} path(s), phase {req.phase or 'unknown (all probes ranked alike)'}"
        )
        res = run_scan(req)
        # Ids from content: a scan redone after an interruption rewrites the same records.
        findings = [
            f.model_copy(update={"id": _content_id("F", f.probe_id, f.file, f.line_start)})
            for f in rerank(res.findings, called_from_case(case))[: max(20, max_hypotheses * 5)]
        ]
        for f in findings:
            ledger.add_finding(f)
        summary = (
            f"scanned {res.files_scanned}/{res.files_total} files ({res.lines} lines) in "
            f"{res.seconds:.1f} s, phase {req.phase or 'unknown'}: {len(res.findings)} findings"
            + (f"; {res.budget_hit}" if res.budget_hit else "")
        )
        ledger.add_evidence(
            Evidence(
                id=_content_id("E", "scan", summary),
                kind=EvidenceKind.static,
                result=EvidenceResult.observed,
                summary=summary,
                data=StaticData(request=req.model_dump(mode="json"), top=[f.id for f in findings]),
            )
        )
        for h in hypotheses_from_findings(findings, max_hypotheses):
            ledger.put_hypothesis(h.model_copy(update={"id": _content_id("H", *h.findings)}))
        ledger.stage("scan", "done", step=rep.step, summary=summary)
        state = ledger.state()
    out = Stage1Result(
        scanned=(done_for(state, "scan", rep.step) or {}).get("summary", ""),
        findings=len(state.findings),
    )
    for hyp in list(state.hypotheses.values()):
        if hyp.reproducer is None or not hyp.findings or hyp.findings[0] not in state.findings:
            continue
        out.hypotheses.append(hyp.id)
        done = [e for e in state.evidence_for(hyp.id) if e.kind == EvidenceKind.reproducer]
        if done and hyp.status == HypothesisStatus.open:
            # Interrupted between the evidence and the status update: the evidence decides.
            hyp = ledger.update_hypothesis(
                hyp.id,
                status=_STATUS.get(done[-1].result, HypothesisStatus.inconclusive),
                reason=BY_LATEST_TEST,
            )
        if hyp.status == HypothesisStatus.supported:
            break  # ranked order: the first supported hypothesis goes on to the trace check
        if not done and hyp.status == HypothesisStatus.open:
            if deadline is not None and time.monotonic() >= deadline:
                ledger.note(
                    f"budget reached: {hyp.id} and later hypotheses left untested", level="warning"
                )
                break
            on_status(f"testing {hyp.id}: {hyp.statement[:70]}")
            ev = test_hypothesis(ledger, case, hyp, state.findings[hyp.findings[0]], timeout_s)
            if ev.result == EvidenceResult.supported:
                break
    state = ledger.state()
    out.supported = [
        h.id for h in state.hypotheses.values() if h.status == HypothesisStatus.supported
    ]
    return out


_STATUS = {
    EvidenceResult.supported: HypothesisStatus.supported,
    EvidenceResult.refuted: HypothesisStatus.refuted,
}


def _content_id(prefix: str, *parts: object) -> str:
    import hashlib

    return f"{prefix}-" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:10]
