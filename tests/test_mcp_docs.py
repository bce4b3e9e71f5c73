"""docs/mcp.md against the server it documents: its tool table is the registry, and its
Python client example runs, unchanged but for the workspace path, against `triage-mcp`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from mcp import Client
from test_mcp_support import make_workspace, run_async, stdio_params, triage_mcp_exe

from mcp_server.tool_table import BEGIN, END, REGENERATE, main, render_table, table_in
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "mcp.md"


def test_mcp_docs_tool_table_lists_every_tool_the_server_offers(tmp_path):
    ws = make_workspace(tmp_path)

    async def go():
        async with Client(stdio_params(ws), read_timeout_seconds=120) as c:
            return (await c.list_tools()).tools

    tools = run_async(go)
    table = table_in(DOC.read_text(), str(DOC))
    assert table == render_table(), f"docs/mcp.md's tool table is stale: run {REGENERATE}"
    rows = re.findall(r"^\| `([a-z_]+)` \| (.*?) \| .*? \| .*? \|$", table, flags=re.M)
    assert [name for name, _ in rows] == [t.name for t in tools]
    said = dict(rows)
    for t in tools:  # the description a client reads is the one the page shows
        assert said[t.name] == " ".join(t.description.split()).replace("|", "\\|")


def test_mcp_docs_tool_table_check_finds_a_stale_page_and_rewrites_it(tmp_path, capsys):
    page = tmp_path / "mcp.md"
    rows = render_table().splitlines()
    stale = "\n".join(r for r in rows if "`rerun_with_intervention`" not in r) + "\n"
    page.write_text(f"# tools\n\n{BEGIN}\n{stale}{END}\n\nafter\n")
    assert main(["--doc", str(page), "--check"]) == 1
    assert REGENERATE in capsys.readouterr().out
    assert main(["--doc", str(page)]) == 0
    assert main(["--doc", str(page), "--check"]) == 0
    text = page.read_text()
    assert "`rerun_with_intervention`" in text and text.endswith(f"{END}\n\nafter\n")


def test_mcp_docs_tool_table_without_markers_is_a_one_line_error(tmp_path):
    page = tmp_path / "mcp.md"
    page.write_text("# no table here\n")
    for doc in (page, tmp_path / "missing.md"):
        out = subprocess.run(
            [sys.executable, "-m", "mcp_server.tool_table", "--doc", str(doc)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert out.returncode == 2, out
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert page.read_text() == "# no table here\n"


def _client_example() -> str:
    text = DOC.read_text()
    after = text.split("<!-- client example", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def test_mcp_docs_python_client_example_runs_against_the_server(tmp_path):
    ws = make_workspace(tmp_path / "case")
    code = _client_example()
    assert '"/path/to/case"' in code and 'command="triage-mcp"' in code
    script = tmp_path / "example.py"
    script.write_text(code.replace('"/path/to/case"', repr(str(ws))))
    bin_dir = os.path.dirname(triage_mcp_exe())
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "confirm_mismatch False" in lines and "ledger_summary True" in lines
    (ev,) = [e for e in Ledger(ws / ".triage").state().evidence if e.kind == EvidenceKind.metrics]
    assert lines[-1].startswith(f"{ev.id} first differing step is 3")
