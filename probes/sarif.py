"""SARIF 2.1.0 export of a scan, for code-scanning UIs.

One rule per probe that ran (id, title, rationale, category, default severity level, the
reproducer template as a property); one result per finding with its region, enclosing
function as a logical location, score as ``rank`` (0-100) and the reproducer parameters.
Paths are emitted as relative URIs when they are relative, else as file URIs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .registry import all_probes
from .scan import ScanResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"high": "error", "medium": "warning", "low": "note"}


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else p.as_posix()


def to_sarif(result: ScanResult) -> dict[str, Any]:
    probes = {p.id: p for p in all_probes()}
    ran = [probes[i] for i in result.probes if i in probes]
    index = {p.id: n for n, p in enumerate(ran)}
    rules = [
        {
            "id": p.id,
            "name": p.id.replace("-", "_"),
            "shortDescription": {"text": p.title},
            "fullDescription": {"text": p.rationale},
            "helpUri": p.references[0] if p.references else None,
            "defaultConfiguration": {"level": _LEVEL[p.severity]},
            "properties": {
                "category": p.category.value,
                "tags": ["determinism", p.category.value],
                "reproducerTemplate": p.template,
            },
        }
        for p in ran
    ]
    for r in rules:
        if r["helpUri"] is None:
            del r["helpUri"]
    results = []
    for f in result.findings:
        res: dict[str, Any] = {
            "ruleId": f.probe_id,
            "level": _LEVEL[f.severity],
            "message": {"text": f.rationale},
            "rank": round(min(1.0, max(0.0, f.score)) * 100, 2),
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(f.file)},
                        "region": {
                            "startLine": f.line_start,
                            "endLine": max(f.line_start, f.line_end),
                            "snippet": {"text": f.snippet},
                        },
                    },
                    **(
                        {
                            "logicalLocations": [
                                {"fullyQualifiedName": f.function, "kind": "function"}
                            ]
                        }
                        if f.function
                        else {}
                    ),
                }
            ],
            "properties": {"findingId": f.id, "category": f.category, "score": f.score},
        }
        if f.probe_id in index:
            res["ruleIndex"] = index[f.probe_id]
        if f.reproducer is not None:
            res["properties"]["reproducer"] = f.reproducer.model_dump()
        results.append(res)
    notifications = [
        {"level": "warning", "message": {"text": f"{p.file}:{p.line}: {p.message}"}}
        for p in result.parse_errors
    ] + [
        {"level": "note", "message": {"text": f"skipped {s.file}: {s.reason}"}}
        for s in result.skipped
    ]
    if result.budget_hit:
        notifications.append({"level": "warning", "message": {"text": result.budget_hit}})
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "bitwise-triage-probes",
                        "rules": rules,
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "toolExecutionNotifications": notifications,
                        "properties": {
                            "filesScanned": result.files_scanned,
                            "filesTotal": result.files_total,
                            "lines": result.lines,
                            "seconds": result.seconds,
                            "budgetHit": result.budget_hit,
                            "revision": result.revision,
                            "phase": result.phase,
                        },
                    }
                ],
                "results": results,
            }
        ],
    }
