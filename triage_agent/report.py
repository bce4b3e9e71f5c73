"""The reviewer's report: Markdown and a self-contained HTML page, both from the ledger alone.

Sections: the mismatch, the metric-distance plot, the timeline of hypotheses with their
evidence and the exact commands that reproduce each, the trace first-divergence table, and
the verdict with its evidence chain. The HTML inlines its CSS and the plot (base64 PNG) so
it can be mailed or attached to an issue as one file.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from .errors import InputError
from .evidence_data import MetricsData, TraceCompareData
from .ledger import Ledger, LedgerState
from .ledger_view import (
    action_text,
    caveats_held,
    commands_text,
    discriminator_rows,
    to_markdown,
    verdict_basis,
)
from .records import EvidenceKind


class ReportPaths(BaseModel):
    markdown: str
    html: str
    plot: str | None = None


def _plot(state: LedgerState, out_dir: Path) -> Path | None:
    ev = next(
        (
            e.data_as(MetricsData)
            for e in state.evidence
            if e.kind == EvidenceKind.metrics and e.data_as(MetricsData).metrics_a is not None
        ),
        None,
    )
    if ev is None:
        return None
    try:
        from .metrics import load_metrics
        from .metrics_plot import plot_metric_distance

        png = out_dir / "metric_distance.png"
        # a record without metrics_b fails here (TypeError) and is said in the error file
        a, b = load_metrics(ev.metrics_a), load_metrics(ev.metrics_b)  # type: ignore[arg-type]
        plot_metric_distance(a, b, png)
        return png
    except Exception as exc:  # noqa: BLE001 - the report must still be written; say why there is no plot
        (out_dir / "metric_distance.error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        return None


def _divergence_rows(state: LedgerState) -> list[dict]:
    rows: list[dict] = []
    for e in state.evidence:
        if e.kind == EvidenceKind.trace_compare:
            for r in e.data_as(TraceCompareData).rows:
                rows.append({"evidence": e.id, **r})
    return rows


def _md_table(rows: list[dict], cols: list[str]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in cols) + " |")
    return out


DIV_COLS = ["evidence", "label", "rank", "role", "step", "kind", "scope", "name", "call", "detail"]
DISC_HEAD = ["arm", "the one thing changed", "applied to", "result", "evidence"]


def render_markdown(state: LedgerState, plot: Path | None) -> str:
    body = to_markdown(state)
    extra: list[str] = []
    mm = next((e for e in state.evidence if e.kind == EvidenceKind.metrics), None)
    if mm is not None:
        extra += ["## Mismatch", "", mm.summary, ""]
    if plot is not None:
        extra += [f"![metric distance per step]({plot.name})", ""]
    rows = _divergence_rows(state)
    if rows:
        extra += [
            "## First divergence per rank (trace comparison)",
            "",
            *_md_table(rows, DIV_COLS),
            "",
        ]
    return body.replace("## Verdict", "\n".join(extra) + "\n## Verdict", 1) if extra else body


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1b1b1b}
h1,h2,h3{font-weight:600} code,pre{font:12px ui-monospace,monospace;background:#f4f4f4}
pre{padding:.6em;overflow-x:auto} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
.verdict{border:2px solid #333;padding:.8em 1em;margin:1em 0;background:#fafafa}
.s-supported{color:#0a7d27;font-weight:600}.s-refuted{color:#b00020}.s-inconclusive,.s-error{color:#a66b00}
img{max-width:100%;border:1px solid #ddd}
"""


def _html_table(
    title: str, head: Iterable[str], cells: Iterable[str], table_id: str | None = None
) -> list[str]:
    """A titled table, one line a row; each of CELLS is one row's ``<td>`` markup, escaped."""
    open_tag = "<table>" if table_id is None else f"<table id='{table_id}'>"
    return [
        f"<h2>{title}</h2>{open_tag}<tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr>",
        *(f"<tr>{row}</tr>" for row in cells),
        "</table>",
    ]


def render_html(state: LedgerState, plot: Path | None) -> str:
    esc = html.escape
    h: list[str] = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>bitwise-triage report</title><style>{_CSS}</style></head><body>"
    ]
    h.append("<h1>bitwise-triage report</h1>")
    if state.case:
        c = state.case
        h.append(
            f"<p>Case <code>{esc(c.name)}</code>: run A <code>{esc(c.run_a.name)}</code> vs run B <code>{esc(c.run_b.name)}</code>.</p>"
        )
    v = state.verdict
    h.append("<div class='verdict' id='verdict'><h2>Verdict</h2>")
    if v:
        h.append(f"<p><b>{esc(v.classification.value)}</b>: {esc(v.statement)}</p><ul>")
        h.append(
            f"<li>location: {esc(v.location or 'n/a')}</li><li>evidence chain: {esc(', '.join(v.evidence))}</li>"
        )
        basis = verdict_basis(state)
        if basis is not None:
            h.append(f"<li>basis: {esc(basis.text)}</li>")
        h.append(f"<li>next action: {esc(action_text(v.next_action) or 'n/a')}</li>")
        h += [f"<li class='caveat'>caveat: {esc(c)}</li>" for c in v.caveats]
        h.append("</ul>")
    else:
        h.append("<p>No verdict recorded.</p>")
        h += [f"<p class='caveat'>caveat: {esc(c)}</p>" for c in caveats_held(state)]
    h.append("</div>")
    mm = next((e for e in state.evidence if e.kind == EvidenceKind.metrics), None)
    if mm is not None:
        h.append(f"<h2>Mismatch</h2><p>{esc(mm.summary)}</p>")
    if plot is not None:
        b64 = base64.b64encode(plot.read_bytes()).decode()
        h.append(
            f"<img id='metric-plot' alt='metric distance per step' onload='this.dataset.loaded=1' src='data:image/png;base64,{b64}'>"
        )
    h.append(
        "<h2>Hypotheses</h2><table><tr><th>id</th><th>hypothesis</th><th>category</th><th>status</th><th>classification</th><th>evidence</th></tr>"
    )
    for hyp in state.hypotheses.values():
        n = len(state.evidence_for(hyp.id))
        h.append(
            f"<tr><td>{esc(hyp.id)}</td><td>{esc(hyp.statement)}<br><small>{esc(hyp.rationale)}</small></td><td>{esc(hyp.category)}</td>"
            f"<td class='s-{hyp.status.value}'>{hyp.status.value}</td><td>{hyp.classification.value}</td><td>{n}</td></tr>"
        )
    h.append("</table>")
    disc = discriminator_rows(state)
    if disc:
        h += _html_table(
            "Interventions (discriminator table)",
            DISC_HEAD,
            (
                "".join(f"<td>{esc(x)}</td>" for x in (r.arm, r.changed, r.applied_to, r.outcome))
                + f"<td class='s-{r.result}'>{esc(r.evidence)}</td>"
                for r in disc
            ),
            table_id="discriminator",
        )
    rows = _divergence_rows(state)
    if rows:
        h += _html_table(
            "First divergence per rank",
            DIV_COLS,
            ("".join(f"<td>{esc(str(r.get(c, '')))}</td>" for c in DIV_COLS) for r in rows),
        )
    h.append("<h2>Timeline of evidence</h2>")
    for e in state.evidence:
        h.append(
            f"<h3>{esc(e.id)} — {e.kind.value}, <span class='s-{e.result.value}'>{e.result.value}</span> <small>{esc(e.created)}</small></h3>"
        )
        if e.hypotheses:
            h.append(f"<p>for {esc(', '.join(e.hypotheses))}</p>")
        h.append(f"<p>{esc(e.summary)}</p>")
        if e.argv:
            h.append(f"<p>to reproduce:</p><pre>{esc(commands_text(e.argv))}</pre>")
        if e.artifacts:
            h.append(
                "<ul>"
                + "".join(
                    f"<li><code>{esc(a.path)}</code> sha256 <code>{a.sha256}</code></li>"
                    for a in e.artifacts
                )
                + "</ul>"
            )
    if state.notes:
        h.append(
            "<h2>Notes</h2><ul>"
            + "".join(
                f"<li>{esc(n['ts'])}: {esc(str(n.get('text', '')))}</li>" for n in state.notes
            )
            + "</ul>"
        )
    h.append("</body></html>")
    return "\n".join(h)


def write_report(ledger: Ledger, out_dir: Path) -> ReportPaths:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, no permission
        raise InputError(f"cannot write the report to {out_dir}: {exc.strerror or exc}") from None
    state = ledger.state()
    plot = _plot(state, out_dir)
    md = out_dir / "report.md"
    md.write_text(render_markdown(state, plot))
    page = out_dir / "report.html"
    page.write_text(render_html(state, plot))
    return ReportPaths(markdown=str(md), html=str(page), plot=str(plot) if plot else None)
