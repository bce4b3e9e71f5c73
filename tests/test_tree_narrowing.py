"""A proven path setting narrowed to the hunks that carry it: two versions of a job's own
package side by side on PYTHONPATH. On jobs that are not corpus cases:

- version 2 builds a new gate before the existing layer (its initialisation draws first and
  shifts the layer's weights) beside harmless edits: the workflow proves PYTHONPATH, then
  bisects the two trees' hunks to the gate's line in v2, proven by one more rerun;
- the pure pieces: a diff that only renames identifiers is read as a rename, and the code
  that still compares against the old name as a string is found (a docstring is not).
"""

from __future__ import annotations

from pathlib import Path

from test_workflow_support import triage

from triage_agent.ledger_view import verdict_basis
from triage_agent.records import Case, EvidenceResult, RunSpec
from triage_agent.workflow.tree_narrowing import name_readers, renames, tree_pair

V1 = '''"""Two layers."""

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))
'''

V2 = '''"""Two layers, and an optional gate (off unless asked for)."""

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(4, 4)
        self.body = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 1)
        self.gated = False

    def forward(self, x):
        hidden = torch.tanh(self.body(x))
        return self.head(hidden)
'''

TRAIN = """import sys

import torch

from netpkg.model import Net
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(3):
        loss = (net(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def _trees_case(tmp: Path) -> Case:
    for version, text in (("v1", V1), ("v2", V2)):
        pkg = tmp / version / "netpkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "model.py").write_text(text)
    (tmp / "train.py").write_text(TRAIN)

    def run(name: str, version: str) -> RunSpec:
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(tmp),
            launch=[["{python}", "train.py", "{out}"]],
            env={"PYTHONPATH": version},
        )

    return Case(
        name="two-trees",
        workspace=str(tmp / "ws"),
        source_roots=[str(tmp)],
        run_a=run("a", "v1"),
        run_b=run("b", "v2"),
        timeout_s=120,
    )


def test_two_package_trees_are_narrowed_to_the_hunk_that_carries_the_difference(tmp_path):
    case = _trees_case(tmp_path)
    assert tree_pair(case, "PYTHONPATH")[2] == "v2"
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 0
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(V2.splitlines(), 1) if "self.gate =" in s)
    assert (v.location or "").startswith(f"v2/netpkg/model.py:{line} "), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.result == EvidenceResult.supported
    # the docstring, the flag and the renamed local were not needed: one hunk carries it
    assert "v2/netpkg/model.py:1 " not in v.location and "model.py:15" not in v.location


def test_a_rename_only_diff_and_the_string_that_still_holds_the_old_name(tmp_path):
    diffs = [
        "--- a/m.py\n+++ b/m.py\n@@ -3 +3 @@\n-        self.norm = nn.LayerNorm(4)\n"
        "+        self.ln = nn.LayerNorm(4)\n",
        "--- a/m.py\n+++ b/m.py\n@@ -7 +7 @@\n-        return self.norm(x)\n"
        "+        return self.ln(x)\n",
    ]
    assert renames(diffs) == {"norm": "ln"}
    added = "--- a/m.py\n+++ b/m.py\n@@ -3,0 +4 @@\n+        self.gate = nn.Linear(4, 4)\n"
    assert renames([*diffs, added]) is None
    (tmp_path / "opt.py").write_text(
        '"""Groups: norm weights are not decayed."""\n'
        'SKIP = (".bias", "norm.weight")\n'
        "\n"
        "\n"
        "def groups(model):\n"
        "    return [n for n, _ in model.named_parameters() if n.endswith(SKIP)]\n"
    )
    (tmp_path / "log.py").write_text('def label(n):\n    return n == "normal"\n')
    assert name_readers(tmp_path, {"norm"}, set()) == [("opt.py", 6, "norm")]


def test_hunks_that_bring_back_a_file_b_removed_name_no_place():
    from triage_agent.workflow.tree_narrowing import _brought_back

    moved = (
        "diff --git a/kit/model.py b/kit/model.py\ndeleted file mode 100644\n"
        "--- a/kit/model.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-import torch\n-X = 1\n"
    )
    edited = (
        "diff --git a/kit/a.py b/kit/a.py\n--- a/kit/a.py\n+++ b/kit/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    )
    assert _brought_back([edited, moved]) == ["kit/model.py"]
    assert _brought_back([edited]) == []
