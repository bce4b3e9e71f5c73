"""Fuzzing the MCP server over stdio and HTTP with calls generated from its tools' schemas:
no crash, no path outside the roots, no smuggled command, no hang, no traceback, and every
request without the right bearer token refused. The benchmark (benchmarks/fuzz_mcp.py)
makes 10,000 calls; CI makes TRIAGE_FUZZ_MCP_CALLS per transport (default 60)."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import fuzz_mcp  # noqa: E402
from mcp_server.security import Workspace  # noqa: E402
from triage_agent.errors import InputError  # noqa: E402

CALLS = int(os.environ.get("TRIAGE_FUZZ_MCP_CALLS", "60"))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_generated_tool_calls_break_nothing(tmp_path, transport):
    s = fuzz_mcp.fuzz(CALLS, transport, seed=7, workdir=tmp_path, heavy=0, call_timeout=60)
    assert s.calls == CALLS and s.clean, (fuzz_mcp.table([s]), s.failures)
    # both kinds of call reached the server, and some were answered, some refused
    assert s.valid and s.calls - s.valid and s.ok and s.refused
    if transport == "http":
        assert s.auth_tried >= 40 and s.auth_refused == s.auth_tried


def test_the_escape_check_sees_a_path_outside(tmp_path):
    """The checker is not vacuous: a result naming a planted link, or a file outside, by a
    key that names a file, is counted; the same string as free text is not."""
    site = fuzz_mcp.build_site(tmp_path / "site")
    allowed = fuzz_mcp.allowed_for(site)
    assert allowed.escapes(site, {"trace_dir": "traces/evil"}) == ["traces/evil"]
    assert allowed.escapes(site, {"files": [{"path": str(site.outside / "secret.txt")}]})
    assert allowed.escapes(site, {"file": "src/leak.py:3 (f)"}) == ["src/leak.py"]
    assert not allowed.escapes(site, {"statement": "traces/evil"})
    assert not allowed.escapes(site, {"path": "src/acc.py", "cwd": str(site.ws)})


def test_a_tilde_path_of_no_user_is_a_one_line_error(tmp_path):
    """'~nosuchuser/x' made Path.expanduser raise RuntimeError: a traceback in the server's
    log and a generic error for the client, where a one-line refusal was due."""
    ws = Workspace(tmp_path)
    with pytest.raises(InputError, match="no such home directory"):
        ws.path("~zz-no-such-user-zz/x")


def test_invalid_arguments_break_the_schema_they_come_from():
    """The generator's invalid calls are invalid: the input model refuses each of them."""
    from pydantic import ValidationError

    from mcp_server.tools import available_tools

    gen = fuzz_mcp.Gen(random.Random(1), ["x", "../y"])
    refused = tried = 0
    for spec in available_tools():
        schema = spec.input.model_json_schema()
        for _ in range(20):
            args = gen.invalid(schema)
            tried += 1
            try:
                spec.input.model_validate(args)
            except (ValidationError, InputError):
                refused += 1
    # a wrong type can be one the field also takes (an int for a float): most, not all
    assert refused >= 0.8 * tried, (refused, tried)


def test_hostile_paths_are_one_line_errors_not_tracebacks(tmp_path):
    """Found by the fuzzer, each a traceback in the server's log before: a path component
    past NAME_MAX (OSError from exists()), a NUL byte or '~nosuchuser' in a case's paths
    (ValueError, RuntimeError from resolve/expanduser), a report directory that is a file
    (FileExistsError from mkdir)."""
    from triage_agent.config import case_from_dict
    from triage_agent.errors import TriageError
    from triage_agent.ledger import Ledger
    from triage_agent.report import write_report

    ws = Workspace(tmp_path)
    with pytest.raises(InputError, match="invalid path"):
        ws.path("x" * 300, must_exist=True)
    for bad in ("a\x00b", "~zz-no-such-user-zz/m"):
        raw = {"case": {"name": "c"}, "runs": {"a": {"metrics": bad}, "b": {"metrics": "m"}}}
        with pytest.raises(TriageError, match="invalid path"):
            case_from_dict(raw, tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="cannot write the report"):
        write_report(Ledger(tmp_path / ".triage"), tmp_path / "afile")


def test_an_argument_a_library_check_refuses_is_a_one_line_tool_error(tmp_path):
    """run_workflow's executor.ray is checked by the library's check_ray_address, which raises an
    InputError inside argument validation: the client got a generic 'Error executing tool'
    and the server logged a traceback, where the check's own line was due."""
    from mcp import Client

    from mcp_server.server import build_server

    async def go():
        async with Client(build_server(Workspace(tmp_path))) as c:
            return await c.call_tool("run_workflow", {"executor": {"ray": "runs/a"}})

    res = fuzz_mcp.anyio.run(go)
    assert res.is_error and "not a Ray address" in res.content[0].text


def test_a_scan_path_past_name_max_is_refused_in_one_line(tmp_path):
    """scan checked whether a path argument exists with Path.exists(), which raises on a
    name past NAME_MAX: a server traceback, found by the fuzzer after the first fixes."""
    from mcp_server.scan_tools import _contained_module_or_path

    with pytest.raises(InputError, match="invalid path"):
        _contained_module_or_path(Workspace(tmp_path), "x" * 300)
