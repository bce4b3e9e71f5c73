"""`patch FILE.diff`: a fix tested as the RFC asks, by rerunning the original job with the
diff applied to a throwaway copy of its tree, uninstrumented, and comparing every step. Real
runs of a small job whose run B carries a defect in a helper module; through the library and
through MCP, where the diff must lie inside the workspace."""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from test_mcp_support import run_async
from test_workflow_support import script_case

from mcp_server.security import Workspace
from mcp_server.server import build_server
from triage_agent.errors import InputError
from triage_agent.interventions import intervene, parse_intervention, to_text
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceResult

HELPER = '''"""How much each step moves."""


def step_size(lr):
    return lr * (1.0 + (1e-3 if FLAG[0] else 0.0))


FLAG = [False]
'''

TRAIN = """import sys
import torch
import helper
from triage_agent.metrics import MetricLog

helper.FLAG[0] = "--tweak" in sys.argv
torch.manual_seed(0)
w = torch.randn(8, requires_grad=True)
x = torch.randn(32, 8)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(3):
        loss = (x @ w).pow(2).mean()
        (g,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= helper.step_size(0.05) * g
        log.log(step, loss=loss.detach())
"""

FIX = """--- a/helper.py
+++ b/helper.py
@@ -2,7 +2,7 @@


 def step_size(lr):
-    return lr * (1.0 + (1e-3 if FLAG[0] else 0.0))
+    return lr


 FLAG = [False]
"""

WRONG = FIX.replace("-    return lr * (1.0", "-    return lr * (2.0")


def _case(tmp_path: Path):
    case = script_case(tmp_path, "patch", "--tweak", {"train.py": TRAIN, "helper.py": HELPER})
    (tmp_path / "src" / "fix.diff").write_text(FIX)
    (tmp_path / "src" / "wrong.diff").write_text(WRONG)
    return case


def test_a_diff_applied_to_a_copy_makes_every_step_match_and_the_tree_is_untouched(tmp_path):
    case = _case(tmp_path)
    iv = parse_intervention("patch fix.diff")
    assert to_text(iv) == "patch fix.diff"
    ledger = Ledger(case.workspace)
    res = intervene(case, "b", [iv], ledger=ledger)
    assert res.match.all_match, res.line
    assert res.result == EvidenceResult.observed  # no hypothesis named: a measurement
    copy = Path(res.outcome.cwd)
    assert copy.is_relative_to(Path(case.workspace).resolve())
    assert "return lr\n" in (copy / "helper.py").read_text()
    assert "1e-3" in (tmp_path / "src" / "helper.py").read_text()  # the tree is untouched
    # a diff that does not apply is a one-line input error, before anything runs
    try:
        intervene(case, "b", [parse_intervention("patch wrong.diff")], ledger=ledger)
    except InputError as exc:
        assert "does not apply" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("a diff that does not apply was accepted")


def test_through_mcp_a_diff_must_lie_inside_the_workspace(tmp_path):
    case = _case(tmp_path)
    (tmp_path / "triage.toml").write_text(
        """[case]
name = "patch"
source_roots = ["src"]

[runs.a]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "{out}"]]

[runs.b]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "{out}", "--tweak"]]
"""
    )
    outside = tmp_path.parent / "outside.diff"
    outside.write_text(FIX)
    ws = Workspace(tmp_path)
    assert case.run_b.launch[0][-1] == "--tweak"

    async def go():
        async with Client(build_server(ws)) as c:
            await c.call_tool("open_case", {})
            bad = await c.call_tool(
                "rerun_with_intervention", {"run": "b", "interventions": [f"patch {outside}"]}
            )
            ok = await c.call_tool(
                "rerun_with_intervention", {"run": "b", "interventions": ["patch src/fix.diff"]}
            )
            return bad, ok

    bad, ok = run_async(go)
    assert bad.is_error and bad.content[0].text.count("\n") == 0
    assert not ok.is_error, ok.content
    assert ok.structured_content["match"]["all_match"]
