"""The one registry of MCP tools: name, title, input model, output model, annotations, function.

The server builds its tool list from ``available_tools()`` and nothing about a tool is
written anywhere else: the description is the function's docstring, the input schema is the
input model's, the output schema the output model's.

Annotations are set honestly: a tool that appends to the ledger is not read-only; a tool
that only appends (never removes or rewrites) is not destructive; a tool that overwrites
files it owns is destructive but idempotent; ``open_world`` is true only for tools that run
processes whose effects reach outside the ledger.

Every tool's module is imported here, unconditionally: a package that fails to import is
an error at start-up, never a tool quietly missing from the list.
"""

from __future__ import annotations

from . import bisect_tools as b
from . import case_tools as c
from . import compare_tools as k
from . import correspond_tools as x
from . import intervention_tools as i
from . import repro_tools as r
from . import scan_tools as s
from . import state_tools as st
from . import trace_tools as t
from . import workflow_tools as w
from .spec import (
    APPENDS,
    APPENDS_IDEMPOTENT,
    APPENDS_MAY_RUN,
    READ_ONLY,
    RUNS_PROCESS,
    RUNS_PROCESS_REBUILDS,
    RUNS_RESUMABLE,
    WRITES_FILES,
    ToolSpec,
)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "open_case", "Open a case file", c.OpenCaseIn, c.CaseOut, APPENDS_IDEMPOTENT, c.open_case
    ),
    ToolSpec(
        "create_case", "Create a case", c.CreateCaseIn, c.CaseOut, APPENDS_IDEMPOTENT, c.create_case
    ),
    ToolSpec(
        "confirm_mismatch",
        "Confirm the mismatch step",
        c.ConfirmMismatchIn,
        c.MismatchOut,
        APPENDS_MAY_RUN,
        c.confirm_mismatch,
    ),
    ToolSpec("list_probes", "List probes", s.ListProbesIn, s.ProbesOut, READ_ONLY, s.list_probes),
    ToolSpec("scan", "Bounded static scan", s.ScanIn, s.ScanOut, APPENDS, s.scan),
    ToolSpec(
        "list_templates",
        "List reproducer templates",
        r.ListTemplatesIn,
        r.TemplatesOut,
        READ_ONLY,
        r.list_templates,
    ),
    ToolSpec(
        "generate_reproducer",
        "Generate a reproducer",
        r.GenerateIn,
        r.GeneratedReproducer,
        APPENDS_IDEMPOTENT,
        r.generate_reproducer,
    ),
    ToolSpec(
        "launch_reproducer",
        "Launch a reproducer by id",
        r.LaunchIn,
        r.Evidence,
        RUNS_PROCESS,
        r.launch_reproducer,
    ),
    ToolSpec("replay_op", "Replay an op", r.ReplayIn, r.Evidence, APPENDS, r.replay_op),
    ToolSpec(
        "capture_trace",
        "Capture a trace",
        t.CaptureTraceIn,
        t.CaptureTraceOut,
        RUNS_PROCESS,
        t.capture_trace,
    ),
    ToolSpec(
        "compare_traces", "Compare traces", k.CompareIn, k.CompareOut, APPENDS, k.compare_traces
    ),
    ToolSpec(
        "first_divergence",
        "Show the first divergence",
        k.TracePairIn,
        k.FirstDivergenceOut,
        READ_ONLY,
        k.first_divergence,
    ),
    ToolSpec(
        "confirm_bytes",
        "Compare dumped bytes",
        k.ConfirmBytesIn,
        k.ConfirmBytesOut,
        APPENDS,
        k.confirm_bytes,
    ),
    ToolSpec(
        "compare_boundaries",
        "Compare two frameworks' boundary captures",
        x.CompareBoundariesIn,
        x.CompareBoundariesOut,
        APPENDS,
        x.compare_boundaries,
    ),
    ToolSpec(
        "compare_state",
        "Compare captured state manifests",
        st.CompareStateIn,
        st.CompareStateOut,
        APPENDS,
        st.compare_state_tool,
    ),
    ToolSpec(
        "record_hypothesis",
        "Record a hypothesis",
        c.RecordHypothesisIn,
        c.HypothesisOut,
        APPENDS,
        c.record_hypothesis,
    ),
    ToolSpec(
        "update_hypothesis",
        "Update a hypothesis",
        c.UpdateHypothesisIn,
        c.HypothesisOut,
        APPENDS_IDEMPOTENT,
        c.update_hypothesis,
    ),
    ToolSpec(
        "list_policies",
        "List run policies",
        w.ListPoliciesIn,
        w.PoliciesOut,
        READ_ONLY,
        w.list_policies,
    ),
    ToolSpec(
        "validate_fix",
        "Validate a fix under one policy",
        w.ValidateFixIn,
        w.FixCheckOut,
        RUNS_PROCESS,
        w.validate_fix,
    ),
    ToolSpec(
        "rerun_with_intervention",
        "Rerun one run with interventions",
        i.RerunWithInterventionIn,
        i.RerunWithInterventionOut,
        RUNS_PROCESS,
        i.rerun_with_intervention,
    ),
    ToolSpec(
        "revert_file",
        "Validate by reverting one file",
        w.RevertFileIn,
        w.FixCheckOut,
        RUNS_PROCESS_REBUILDS,
        w.revert_file,
    ),
    ToolSpec(
        "bisect_source",
        "Bisect source revisions to commits and hunks",
        b.BisectSourceIn,
        b.BisectResult,
        RUNS_RESUMABLE,
        b.bisect_source,
    ),
    ToolSpec(
        "run_workflow",
        "Run the whole workflow",
        w.RunWorkflowIn,
        w.RunWorkflowOut,
        RUNS_RESUMABLE,
        w.run_workflow,
    ),
    ToolSpec(
        "suggest_next",
        "What the workflow would do next",
        w.SuggestNextIn,
        w.NextMoves,
        READ_ONLY,
        w.suggest_next,
    ),
    ToolSpec(
        "record_verdict",
        "Record the verdict",
        c.RecordVerdictIn,
        c.VerdictOut,
        APPENDS,
        c.record_verdict,
    ),
    ToolSpec("add_note", "Add a note", c.AddNoteIn, c.NoteOut, APPENDS, c.add_note),
    ToolSpec(
        "ledger_summary",
        "Ledger summary",
        c.LedgerSummaryIn,
        c.LedgerSummaryOut,
        READ_ONLY,
        c.ledger_summary,
    ),
    ToolSpec(
        "write_report",
        "Write the report",
        c.WriteReportIn,
        c.ReportOut,
        WRITES_FILES,
        c.write_report,
    ),
)


def available_tools() -> list[ToolSpec]:
    specs = list(TOOLS)
    names = [t.name for t in specs]
    if len(names) != len(set(names)):  # pragma: no cover - a programming error
        raise RuntimeError(f"duplicate tool names in the registry: {names}")
    return specs
