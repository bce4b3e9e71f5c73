"""Which installed frameworks' source the static scan takes in."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from triage_agent.records import Case, RunSpec
from triage_agent.workflow.stage1 import framework_paths


def test_a_framework_imported_only_by_the_scanned_library_is_scanned(tmp_path):
    lib = tmp_path / "mylib"
    lib.mkdir()
    (lib / "__init__.py").write_text("from .engine import train\n")
    (lib / "engine.py").write_text(
        "import deepspeed\n\n\ndef train():\n    deepspeed.init_distributed()\n"
    )
    (tmp_path / "train.py").write_text("import sys\nfrom mylib import train\n\ntrain()\n")
    run = RunSpec(name="a", metrics="{out}", cwd=str(tmp_path), launch=[["python", "train.py"]])
    case = Case(run_a=run, run_b=run.model_copy(update={"name": "b"}), scan_paths=[str(lib)])
    ds = next(iter(importlib.util.find_spec("deepspeed").submodule_search_locations))
    assert framework_paths(case) == [ds]
    # the launch script alone imports no framework
    assert framework_paths(case.model_copy(update={"scan_paths": []})) == []
    # a scan path that is one file counts as well
    one = case.model_copy(update={"scan_paths": [str(lib / "engine.py")]})
    assert [Path(p) for p in framework_paths(one)] == [Path(ds)]
