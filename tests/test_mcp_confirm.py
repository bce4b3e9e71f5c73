"""What confirm_mismatch and validate_fix tell a real client over stdio: the mismatch's
evidence id first, what the runs were told differently with both values, the provenance of a
rerun once, and a case repository that the tool's own workspace does not make dirty."""

from __future__ import annotations

import json

import git
from mcp import Client
from test_mcp_support import (
    case_toml,
    make_relaunch_workspace,
    make_workspace,
    run_async,
    stdio_params,
)

from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind


def _declared(report: dict) -> dict[str, dict]:
    return {d["key"]: d for d in report["declared"]}


def test_mcp_confirm_mismatch_names_its_evidence_and_the_declared_differences(tmp_path):
    """B alone passes --perturb-at and sets TOY_MODE: both come back with both values, in the
    report, its facts and the recorded evidence, whose id leads the result. The case lives in
    a git repository: the rerun validate_fix makes records it clean, the workspace left out,
    and its provenance once."""
    ws = make_relaunch_workspace(tmp_path)
    toml = (ws / "triage.toml").read_text()
    (ws / "triage.toml").write_text(
        toml.replace("[runs.b]\n", '[runs.b]\nenv = { TOY_MODE = "fast" }\n')
    )
    repo = git.Repo.init(ws)
    repo.index.add(["triage.toml", "src/train.py"])
    repo.index.commit("the case")

    async def go():
        async with Client(stdio_params(ws), read_timeout_seconds=600) as c:
            confirmed = await c.call_tool("confirm_mismatch", {"relaunch": True})
            fixed = await c.call_tool("validate_fix", {"policy": "restore-rng"})
        return confirmed, fixed

    confirmed, fixed = run_async(go)
    assert not confirmed.is_error, confirmed.content
    out = confirmed.structured_content
    assert next(iter(out)) == "evidence_id"
    st = Ledger(ws / ".triage").state()
    (ev,) = [e for e in st.evidence if e.kind == EvidenceKind.metrics]
    assert out["evidence_id"] == ev.id
    rep = out["report"]
    assert rep["step"] == 2
    d = _declared(rep)
    flag, env = d["--perturb-at"], d["TOY_MODE"]
    assert (flag["kind"], flag["a_has"], flag["b_has"], flag["b"]) == ("flag", False, True, "2")
    assert (env["kind"], env["a_has"], env["b"]) == ("env", False, "fast")
    assert rep["env_differs"] == {"TOY_MODE": [None, "fast"]}
    facts = " ".join(rep["facts"])
    assert '--perturb-at (A: absent, B: "2")' in facts and "TOY_MODE (A: unset" in facts
    assert "--perturb-at" in ev.summary
    assert {x["key"] for x in ev.data.declared} == {"--perturb-at", "TOY_MODE"}

    assert not fixed.is_error, fixed.content
    evidence = fixed.structured_content["evidence"]
    assert json.dumps(fixed.structured_content).count('"provenance"') == 1
    assert "provenance" not in evidence["data"]["rerun"]
    (repo_info,) = evidence["provenance"]["git"].values()
    assert repo_info["dirty"] is False and repo_info["dirty_excludes"] == [".triage"]
    assert (ws / ".triage" / "ledger.jsonl").is_file()


def test_mcp_confirm_mismatch_names_a_positional_argument_only_one_run_has(tmp_path):
    ws = make_workspace(tmp_path)
    (ws / "triage.toml").write_text(
        case_toml(
            "toy",
            ["python", "train.py", "--lr", "0.1"],
            ["python", "train.py", "resume", "--lr", "0.1"],
        )
    )

    async def go():
        async with Client(stdio_params(ws), read_timeout_seconds=120) as c:
            return await c.call_tool("confirm_mismatch", {})

    res = run_async(go)
    assert not res.is_error, res.content
    rep = res.structured_content["report"]
    (d,) = rep["declared"]
    assert d["kind"] == "positional" and d["key"] == "argument 3"
    assert d["a_has"] is False and d["b"] == "resume"
    assert 'positional argument 3 (A: absent, B: "resume")' in " ".join(rep["facts"])
