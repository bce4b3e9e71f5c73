"""Causal checks and the whole workflow through MCP: run policies, fix validation under one
policy (a policy that makes the runs match vs one that does not), a one-file revert on a
source-update case, the headless workflow with progress, and who may launch them."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
from mcp import Client
from test_mcp_support import make_workspace, run_async

from mcp_server.security import Workspace
from mcp_server.server import build_server
from triage_agent.metrics import diff_metrics, load_metrics
from triage_agent.policies import POLICIES
from triage_agent.records import EvidenceKind

# B takes a scheduling-dependent path (standing in for an atomic-add kernel) that nudges one
# weight from step 1, but only while deterministic algorithms are off: the
# 'deterministic' policy removes the difference, 'restore-rng' does not act on this job.
POLICY_TRAIN = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--fast-path", action="store_true")
a = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        if step == 1 and a.fast_path and not torch.are_deterministic_algorithms_enabled():
            with torch.no_grad():
                model[0].weight[0, 0] += 1e-3
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""

POLICY_TOML = """
[case]
name = "policy"
source_roots = ["src"]

[runs.a]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "--out", "{out}"]]

[runs.b]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "--out", "{out}", "--fast-path"]]
"""


@pytest.fixture
def policy_ws(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(POLICY_TRAIN)
    (tmp_path / "triage.toml").write_text(POLICY_TOML)
    return Workspace(tmp_path)


def test_list_policies_is_read_only_and_complete(tmp_path):
    ws = Workspace(make_workspace(tmp_path))

    async def go():
        async with Client(build_server(ws)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            return tools, await c.call_tool("list_policies", {})

    tools, r = run_async(go)
    assert not r.is_error, r.content
    got = {p["name"]: p["changes"] for p in r.structured_content["policies"]}
    assert set(got) == set(POLICIES) and all(got.values())
    ann = tools["list_policies"].annotations
    assert ann.read_only_hint and not ann.destructive_hint
    for name in ("validate_fix", "revert_file", "run_workflow"):
        a = tools[name].annotations
        assert not a.read_only_hint and a.open_world_hint, name
    assert not tools["validate_fix"].annotations.idempotent_hint
    assert tools["run_workflow"].annotations.idempotent_hint
    assert ws.ledger.state().events == 0


def test_validate_fix_one_policy_matches_the_other_does_not(policy_ws):
    ws = policy_ws
    progress = []

    async def go():
        async with Client(build_server(ws)) as c:
            out = {"unknown": await c.call_tool("validate_fix", {"policy": "go-faster"})}
            out["bad_hyp"] = await c.call_tool(
                "validate_fix", {"policy": "deterministic", "hypotheses": ["H-missing"]}
            )
            await c.call_tool("open_case", {})
            h = await c.call_tool(
                "record_hypothesis",
                {"statement": "a scheduling-dependent kernel on B", "category": "nondeterminism"},
            )
            hid = h.structured_content["hypothesis"]["id"]

            async def on_progress(done, total, message):
                progress.append((done, total, message))

            out["det"] = await c.call_tool(
                "validate_fix",
                {"policy": "deterministic", "hypotheses": [hid], "timeout_s": 300},
                progress_callback=on_progress,
            )
            out["rng"] = await c.call_tool(
                "validate_fix", {"policy": "restore-rng", "hypotheses": [hid], "timeout_s": 300}
            )
            out["upd"] = await c.call_tool(
                "update_hypothesis",
                {
                    "id": hid,
                    "status": "supported",
                    "evidence": [out["det"].structured_content["evidence"]["id"]],
                },
            )
            return hid, out

    hid, out = run_async(go)
    assert (
        out["unknown"].is_error and "unknown policy 'go-faster'" in out["unknown"].content[0].text
    )
    assert out["bad_hyp"].is_error and "H-missing" in out["bad_hyp"].content[0].text
    det, rng = out["det"], out["rng"]
    assert not det.is_error, det.content
    assert not rng.is_error, rng.content
    d, r = det.structured_content, rng.structured_content
    # the baselines really differ, so a match under the policy is the policy's doing
    base_b = next(Path(ws.ledger.workspace, "runs").glob("b/baseline-*"))
    assert diff_metrics(load_metrics(d["baseline_a"]), load_metrics(base_b)).first_step == 1
    assert d["matched"] and d["evidence"]["result"] == "supported"
    assert d["evidence"]["data"]["applied_to"] == "B only"
    # restore-rng does not act on this job (no resume): each run under it wrote its own
    # baseline's bits, so it neither supports nor refutes the hypothesis
    assert not r["matched"] and r["evidence"]["result"] == "not-applicable"
    assert r["evidence"]["summary"].startswith("not applicable: policy 'restore-rng'")
    assert r["evidence"]["data"]["applied_to"] == "A and B"  # B alone failed, then both
    assert r["evidence"]["data"]["first_step"] == 1
    st = ws.ledger.state()
    reruns = [e for e in st.evidence if e.kind == EvidenceKind.rerun]
    assert [e.data.policy for e in reruns] == ["deterministic", "restore-rng"]
    assert all(e.hypotheses == [hid] and e.argv for e in reruns)
    assert not any("triage_agent.fingerprint" in " ".join(e.argv) for e in reruns)
    assert not out["upd"].is_error and st.hypotheses[hid].status.value == "supported"
    # a report held back by the throttle travels joined with the next one ("; ")
    stages = {p.split(":", 1)[0] for _, _, m in progress[:-1] if m for p in m.split("; ")}
    assert {"baseline", "fix"} <= stages, progress
    assert progress and progress[-1][0] == progress[-1][1]
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)


def test_validate_fix_refuses_a_case_opened_through_a_tool(tmp_path):
    ws = Workspace(make_workspace(tmp_path))

    async def go():
        async with Client(build_server(ws)) as c:
            made = await c.call_tool(
                "create_case", {"run_a": {"metrics": "runs/a"}, "run_b": {"metrics": "runs/b"}}
            )
            fix = await c.call_tool("validate_fix", {"policy": "deterministic"})
            rev = await c.call_tool("revert_file", {"file": "train.py"})
            return made, fix, rev

    made, fix, rev = run_async(go)
    assert not made.is_error, made.content
    for r in (fix, rev):
        assert r.is_error and "started with" in r.content[0].text
    assert not [e for e in ws.ledger.state().evidence if e.kind == EvidenceKind.rerun]
    assert not (ws.ledger.workspace / "runs").exists()


def _commit(repo: git.Repo, files: dict[str, str], msg: str) -> str:
    for name, text in files.items():
        Path(repo.working_tree_dir, name).write_text(text)
    repo.index.add(list(files))
    return repo.index.commit(msg).hexsha


def test_revert_file_validates_the_changed_file_on_a_source_update(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    repo = git.Repo.init(src)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.com")
    plain = POLICY_TRAIN.replace(
        "and a.fast_path and not torch.are_deterministic_algorithms_enabled()", "and False"
    )
    rev_a = _commit(repo, {"train.py": plain, "notes.txt": "v1\n"}, "v1")
    # v2 changes the training step (always takes the nudging path) and adds a file
    changed = POLICY_TRAIN.replace(
        "and a.fast_path and not torch.are_deterministic_algorithms_enabled()", ""
    )
    rev_b = _commit(repo, {"train.py": changed, "extra.py": "X = 2\n"}, "v2")
    repo.git.worktree("add", str(tmp_path / "src" / "wt_a"), rev_a)
    (tmp_path / "triage.toml").write_text(
        f"""
[case]
name = "update"
source_roots = ["src"]

[runs.a]
metrics = "{{out}}"
cwd = "src/wt_a"
launch = [["{{python}}", "train.py", "--out", "{{out}}"]]
[runs.a.source]
repo = "src"
rev = "{rev_a}"

[runs.b]
metrics = "{{out}}"
cwd = "src"
launch = [["{{python}}", "train.py", "--out", "{{out}}"]]
[runs.b.source]
repo = "src"
rev = "{rev_b}"
"""
    )
    ws = Workspace(tmp_path)

    async def go():
        async with Client(build_server(ws)) as c:
            out = {}
            for bad in ("../src/train.py", "/etc/passwd", "notes.txt", "train.py/../x"):
                out[bad] = await c.call_tool("revert_file", {"file": bad})
            out["ok"] = await c.call_tool("revert_file", {"file": "train.py", "timeout_s": 300})
            return out

    out = run_async(go)
    for bad in ("../src/train.py", "/etc/passwd", "train.py/../x"):
        assert out[bad].is_error and "without '..'" in out[bad].content[0].text, bad
    assert out["notes.txt"].is_error and "did not change" in out["notes.txt"].content[0].text
    ok = out["ok"]
    assert not ok.is_error, ok.content
    res = ok.structured_content
    assert res["matched"] and res["evidence"]["data"]["reverted"] == "train.py"
    variant = Path(res["evidence"]["data"]["variant"])
    assert variant.is_relative_to(ws.ledger.workspace)
    assert (variant / "train.py").read_text() == plain
    assert (src / "train.py").read_text() == changed  # the checkout is never touched


def test_run_workflow_reports_verdict_progress_and_resumes(tmp_path):
    ws = Workspace(make_workspace(tmp_path))
    progress = []

    async def go():
        async with Client(build_server(ws)) as c:
            out = {
                "zero": await c.call_tool("run_workflow", {"budget_minutes": 0}),
                "big": await c.call_tool("run_workflow", {"max_hypotheses": 21}),
                "ray": await c.call_tool("run_workflow", {"executor": {"ray": "runs/a"}}),
            }

            async def on_progress(done, total, message):
                progress.append((done, total, message))

            out["first"] = await c.call_tool(
                "run_workflow", {"budget_minutes": 2}, progress_callback=on_progress
            )
            out["events"] = ws.ledger.state().events
            out["again"] = await c.call_tool("run_workflow", {"budget_minutes": 2})
            return out

    out = run_async(go)
    for bad in ("zero", "big", "ray"):
        assert out[bad].is_error and out[bad].content[0].text.count("\n") == 0
    first = out["first"]
    assert not first.is_error, first.content
    r = first.structured_content
    # metric bits first differ at step 3 (the toy runs); nothing here can be proven causal
    assert r["mismatch"]["step"] == 3
    assert r["verdict"]["classification"] == "unknown" and r["verdict"]["next_action"]
    assert r["basis"]["kind"] == "none" and r["interventions"] == []
    st = ws.ledger.state()
    assert st.verdict is not None and st.verdict.statement == r["verdict"]["statement"]
    assert {"confirm", "verdict"} <= set(st.stages_done())
    # where the time went: metric files only, so nothing was launched
    times = {s["stage"]: s for s in r["stages"]}
    assert {"confirm", "stage 1", "verdict"} <= set(times)
    assert all(s["launches"] == 0 and s["seconds"] >= 0 for s in r["stages"])
    messages = " ".join(m for _, _, m in progress if m)
    assert "confirm" in messages
    assert progress[-1][0] == progress[-1][1]
    again = out["again"]
    assert not again.is_error, again.content
    assert again.structured_content["verdict"] == r["verdict"]
    # resumable: a finished workflow adds stage markers at most, no new evidence
    assert len(ws.ledger.state().evidence) == len(st.evidence)


def test_suggest_next_shows_the_loops_ranking_and_launches_nothing(policy_ws):
    ws = policy_ws

    async def go():
        async with Client(build_server(ws)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            await c.call_tool("open_case", {})
            out = {"before": await c.call_tool("suggest_next", {})}
            out["confirm"] = await c.call_tool("confirm_mismatch", {"relaunch": True})
            out["runs"] = sorted(p.name for p in (ws.root / ".triage" / "runs").rglob("*-*"))
            out["after"] = await c.call_tool("suggest_next", {})
            out["runs_after"] = sorted(p.name for p in (ws.root / ".triage" / "runs").rglob("*-*"))
            return tools, out

    tools, out = run_async(go)
    assert tools["suggest_next"].annotations.read_only_hint
    before = out["before"]
    assert not before.is_error, before.content
    assert before.structured_content["suggestions"] == []
    assert "baselines have not run" in before.structured_content["said"]
    assert not out["confirm"].is_error, out["confirm"].content
    after = out["after"].structured_content
    assert after["mismatch_step"] == 1
    ranked = after["suggestions"]
    made = [s for s in ranked if s["waits"] is None]
    # nothing is observed yet: the scan (beside the state capture) ranks first, and the
    # flag only B passes is a test that waits for the observations
    assert made[0]["kind"] == "observe" and "scan" in made[0]["move"]
    waiting = {s["intervention"]: s["waits"] for s in ranked if s["waits"]}
    assert waiting.get("drop --fast-path") == "waits for the observations still to make"
    assert all(s["why"] for s in ranked)
    assert out["runs_after"] == out["runs"]  # nothing launched by suggest_next
