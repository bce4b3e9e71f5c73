"""Security regressions: path traversal, symlink escape, flag injection, oversized input."""

from __future__ import annotations

import git
import pytest
from mcp import Client
from test_mcp_support import make_workspace, run_async

from mcp_server.security import Workspace
from mcp_server.server import BearerAuth, build_server, check_loopback
from triage_agent.errors import InputError, PathEscapeError


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(make_workspace(root, with_case_file=False))


def call(ws, name, args):
    async def go():
        async with Client(build_server(ws)) as c:
            return await c.call_tool(name, args)

    return run_async(go)


def _case(a="runs/a", **extra):
    return {"run_a": {"metrics": a}, "run_b": {"metrics": "runs/b"}, **extra}


def test_mcp_path_traversal_refused(ws):
    r = call(ws, "create_case", _case("../../etc"))
    assert r.is_error and "outside the allowed roots" in r.content[0].text
    assert ws.ledger.state().case is None


def test_mcp_absolute_path_outside_refused(ws):
    r = call(ws, "open_case", {"path": "/etc/passwd"})
    assert r.is_error and "outside the allowed roots" in r.content[0].text


def test_mcp_symlink_escape_refused(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "link").symlink_to(outside)
    r = call(ws, "create_case", _case("link"))
    assert r.is_error and "outside the allowed roots" in r.content[0].text
    with pytest.raises(PathEscapeError):
        ws.path("link/metrics_rank0.jsonl")


def test_mcp_case_file_cannot_widen_roots_or_bring_commands(ws):
    (ws.root / "evil.toml").write_text(
        '[case]\nsource_roots = ["/"]\n[runs.a]\nmetrics = "runs/a"\n[runs.b]\nmetrics = "runs/b"\n'
    )
    r = call(ws, "open_case", {"path": "evil.toml"})
    assert r.is_error and "outside the allowed roots" in r.content[0].text
    (ws.root / "cmd.toml").write_text(
        '[runs.a]\nmetrics = "runs/a"\nlaunch = [["sh", "-c", "id"]]\n[runs.b]\nmetrics = "runs/b"\n'
    )
    r = call(ws, "open_case", {"path": "cmd.toml"})
    assert r.is_error and "launch commands" in r.content[0].text


@pytest.mark.parametrize("rev", ["--output=/tmp/x", "-n1", "HEAD;id", "$(id)", "a..b", ""])
def test_mcp_flag_and_shell_injection_in_revisions_refused(ws, rev):
    git.Repo.init(ws.root / "src")
    r = call(
        ws,
        "create_case",
        _case(run_a={"metrics": "runs/a"})
        | {"run_a": {"metrics": "runs/a", "source_repo": "src", "source_rev": rev}},
    )
    assert r.is_error and (
        "invalid git revision" in r.content[0].text or "invalid" in r.content[0].text
    )


def test_mcp_revision_must_resolve(ws):
    repo = git.Repo.init(ws.root / "src")
    repo.index.add(["train.py"])
    sha = repo.index.commit("init").hexsha
    assert ws.rev("src", "HEAD") == sha
    with pytest.raises(InputError, match="does not resolve"):
        ws.rev("src", "no-such-branch")
    r = call(
        ws,
        "create_case",
        {
            "run_a": {"metrics": "runs/a", "source_repo": "src", "source_rev": "HEAD"},
            "run_b": {"metrics": "runs/b", "source_repo": "src", "source_rev": "nope"},
        },
    )
    assert r.is_error and "does not resolve" in r.content[0].text


@pytest.mark.parametrize(
    "name,args",
    [
        ("add_note", {"text": "x" * 20_001}),
        ("record_hypothesis", {"statement": "s", "category": "c", "findings": ["F-1"] * 501}),
        ("open_case", {"path": "a/" * 3000}),
        ("confirm_mismatch", {"step": 10**12}),
        ("add_note", {"text": "ok", "unexpected": True}),
    ],
)
def test_mcp_oversized_or_unknown_input_rejected(ws, name, args):
    before = ws.ledger.state().events
    r = call(ws, name, args)
    assert r.is_error
    text = r.content[0].text
    assert "\n" not in text and text.startswith(f"Error executing tool {name}: invalid ")
    assert ws.ledger.state().events == before


def test_mcp_nul_byte_path_refused(ws):
    with pytest.raises(InputError):
        ws.path("runs/a\x00/x")


def test_mcp_http_host_must_be_loopback():
    assert check_loopback("127.0.0.1") == "127.0.0.1"
    assert check_loopback("::1") == "::1"
    for bad in ("0.0.0.0", "192.168.1.4", "example.com"):
        with pytest.raises(InputError):
            check_loopback(bad)


def test_mcp_bearer_token_required_before_the_app_sees_the_request():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    guard = BearerAuth(app, "s" * 32)
    sent = []

    async def send(msg):
        sent.append(msg)

    def scope(token):
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        return {"type": "http", "headers": headers}

    async def go():
        await guard(scope(None), None, send)
        await guard(scope("t" * 32), None, send)
        await guard(scope("s" * 32), None, send)
        await guard({"type": "lifespan"}, None, send)

    run_async(go)
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [401, 401]
    assert seen == ["http", "lifespan"]
    with pytest.raises(InputError):
        BearerAuth(app, "short")


@pytest.mark.parametrize("spec", ["--output=x..HEAD", "HEAD..-p", "HEAD...main", "HEAD"])
def test_mcp_scan_diff_flag_injection_refused(ws, spec):
    repo = git.Repo.init(ws.root / "src")
    repo.index.add(["train.py"])
    repo.index.commit("init")
    r = call(ws, "scan", {"diff": spec, "repo": "src"})
    assert r.is_error and "Traceback" not in r.content[0].text
    assert ws.ledger.state().findings == {}


def test_mcp_scan_diff_between_real_revisions(ws):
    from test_mcp_support import TRAIN_SRC

    repo = git.Repo.init(ws.root / "src")
    repo.index.add(["train.py"])
    a = repo.index.commit("a").hexsha
    (ws.root / "src" / "loop.py").write_text(TRAIN_SRC)
    repo.index.add(["loop.py"])
    b = repo.index.commit("b").hexsha
    r = call(ws, "scan", {"diff": f"{a}..{b}", "repo": "src"})
    assert not r.is_error, r.content
    res = r.structured_content["result"]
    assert res["revision"] == b
    assert {f["file"] for f in res["findings"]} == {"loop.py"}


def _properties(schema, defs=None):
    """Every property name in a JSON schema, nested models included."""
    defs = defs if defs is not None else schema.get("$defs", {})
    names = set()
    for key, sub in (schema.get("properties") or {}).items():
        names.add(key)
        names |= _subschema_properties(sub, defs)
    return names


def _subschema_properties(sub, defs):
    out = set()
    if "$ref" in sub:
        out |= _properties(defs[sub["$ref"].split("/")[-1]], defs)
    for k in ("anyOf", "allOf", "oneOf"):
        for s in sub.get(k, []):
            out |= _subschema_properties(s, defs)
    if "items" in sub and isinstance(sub["items"], dict):
        out |= _subschema_properties(sub["items"], defs)
    return out


def test_mcp_no_tool_takes_a_command_or_environment(ws):
    async def go():
        async with Client(build_server(ws)) as c:
            return (await c.list_tools()).tools

    forbidden = {"argv", "command", "cmd", "shell", "env", "launch", "script", "program"}
    for tool in run_async(go):
        props = _properties(tool.input_schema)
        assert not props & forbidden, (tool.name, props & forbidden)
        assert tool.input_schema.get("additionalProperties") is False
        if tool.annotations.open_world_hint is False:
            # Only open-world tools may start processes: none of these names a run or an id to run.
            assert tool.name not in {"launch_reproducer", "capture_trace"}


def test_mcp_every_tool_is_exercised_by_a_test():
    import pathlib

    from mcp_server.tools import available_tools

    text = "".join(p.read_text() for p in pathlib.Path(__file__).parent.glob("test_mcp*.py"))
    missing = [s.name for s in available_tools() if f'"{s.name}"' not in text]
    assert not missing, f"tools without a test call: {missing}"


def test_mcp_symlinked_file_inside_a_scanned_directory_refused(ws, tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("import torch\nfor i in range(3):\n    torch.manual_seed(i)\n")
    (ws.root / "src" / "innocent.py").symlink_to(secret)
    r = call(ws, "scan", {"paths": ["src"]})
    assert r.is_error and "outside the allowed roots" in r.content[0].text
    assert ws.ledger.state().findings == {}


def test_mcp_symlinked_trace_file_refused(ws, tmp_path):
    outside = tmp_path / "trace_rank0.jsonl"
    outside.write_text("{}\n")
    (ws.root / "ta").mkdir()
    (ws.root / "ta" / "trace_rank0.jsonl").symlink_to(outside)
    r = call(ws, "compare_traces", {"trace_a": "ta", "trace_b": "ta"})
    assert r.is_error and "outside the allowed roots" in r.content[0].text


def test_mcp_report_file_linked_outside_is_not_written_through(ws, tmp_path):
    target = tmp_path / "victim.md"
    target.write_text("keep me\n")
    report = ws.ledger.workspace / "report"
    report.mkdir(parents=True)
    (report / "report.md").symlink_to(target)
    r = call(ws, "write_report", {})
    assert r.is_error and "outside the allowed roots" in r.content[0].text
    assert target.read_text() == "keep me\n"


def test_mcp_ledger_linked_outside_refused_at_start(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    make_workspace(root, with_case_file=False)
    (root / ".triage").mkdir()
    (root / ".triage" / "ledger.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(PathEscapeError):
        Workspace(root)


FRAMEWORK_CASE = """
[case]
name = "ds"
source_roots = ["src"]
scan_paths = ["src/train.py"]

[runs.a]
metrics = "runs/a"
launch = [["python", "src/train.py"]]

[runs.b]
metrics = "runs/b"
"""


def test_mcp_scan_reads_an_imported_framework_read_only_and_nothing_else(tmp_path):
    """The scan may read the installed source of a framework the case imports, as the
    headless workflow does; other installed packages and writes there stay refused."""
    import importlib.util
    from pathlib import Path

    root = make_workspace(tmp_path / "ws", with_case_file=False)
    (root / "src" / "train.py").write_text("import deepspeed\n")
    (root / "triage.toml").write_text(FRAMEWORK_CASE)
    ws = Workspace(root)
    ds = Path(importlib.util.find_spec("deepspeed").submodule_search_locations[0]).resolve()
    assert ws.info().read_only_roots == [str(ds)]
    engine = ds / "runtime" / "engine.py"
    r = call(ws, "scan", {"paths": [str(engine)], "record": False})
    assert not r.is_error, r.content[0].text
    assert r.structured_content["result"]["files_scanned"] == 1
    r = call(ws, "scan", {"paths": ["deepspeed.runtime.engine"], "record": False})
    assert not r.is_error and r.structured_content["result"]["files_scanned"] == 1
    # with no paths, the scan covers the case's code and then the framework, as triage run does
    r = call(ws, "scan", {"max_files": 2, "record": False})
    assert not r.is_error and r.structured_content["result"]["files_total"] > 100
    # a package the case does not import, and anything else outside, are still refused
    torch_dir = Path(importlib.util.find_spec("torch").submodule_search_locations[0])
    for outside in (str(torch_dir / "nn" / "functional.py"), "/etc"):
        r = call(ws, "scan", {"paths": [outside]})
        assert r.is_error and "outside the allowed roots" in r.content[0].text
    # read-only: no tool writes into the framework's source
    r = call(ws, "write_report", {"out_dir": str(ds / "report")})
    assert r.is_error and "outside the allowed roots" in r.content[0].text
    assert not (ds / "report").exists()
    with pytest.raises(PathEscapeError):
        ws.path(engine)
    # a case whose scripts do not import it gets no such root
    (root / "src" / "train.py").write_text("import torch\n")
    assert Workspace(root).info().read_only_roots == []
