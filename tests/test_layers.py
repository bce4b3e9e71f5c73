"""The layers the code is built in: records, errors and paths at the bottom, importing
nothing above them; probes resting on that floor alone; no import circle in the comparator."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOTTOM = (
    "triage_agent.records",
    "triage_agent.errors",
    "triage_agent.paths",
    "triage_agent.evidence_data",
)
OURS = ("triage_agent", "probes", "reproducers", "mcp_server")


def _loaded_after(imports: list[str]) -> list[str]:
    """Import ``imports`` in a fresh interpreter; return every module it then holds."""
    code = (
        "import importlib, json, sys\n"
        f"for m in {imports!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout)


def _ours(mods: list[str]) -> set[str]:
    return {m for m in mods if m.split(".")[0] in OURS}


def test_layers_bottom_imports_nothing_above_it():
    mods = _loaded_after(list(BOTTOM))
    assert _ours(mods) == {"triage_agent", *BOTTOM}
    assert not {"torch", "numpy", "typer", "rich"} & set(mods)


def test_layers_probes_rest_on_the_bottom_layer_alone():
    mods = _loaded_after(["probes.registry", "probes.scan", "probes.sarif"])
    above = {m for m in _ours(mods) if m.startswith("triage_agent")} - {"triage_agent", *BOTTOM}
    assert above == set()


def test_layers_probe_and_finding_share_one_category_enum():
    from probes.model import Category as ProbeCategory
    from probes.registry import all_probes
    from triage_agent.records import Category, Finding, Hypothesis

    assert ProbeCategory is Category
    p = all_probes()[0]
    f = Finding(probe_id=p.id, category=p.category.value, file="x.py", line_start=1, line_end=1)
    assert f.category is p.category
    assert Hypothesis(statement="s", category="casts").category is Category.casts
    # a category the workflow or an assistant names is kept as given, never lost
    assert Hypothesis(statement="s", category="source-change").category == "source-change"


def _relative_imports(path: Path, package: str) -> set[str]:
    """Every module of ``package`` that ``path`` imports, at any depth (function bodies too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            base = f"{package}.{node.module}" if node.module else package
            found |= {base} if node.module else {f"{package}.{a.name}" for a in node.names}
    return found


def test_layers_comparator_has_no_import_circle():
    pkg_dir = ROOT / "triage_agent" / "compare"
    package = "triage_agent.compare"
    graph = {
        f"{package}.{p.stem}": _relative_imports(p, package)
        for p in pkg_dir.glob("*.py")
        if p.stem != "__init__"
    }
    done: set[str] = set()

    def visit(mod: str, path: list[str]) -> None:
        if mod in path:
            cycle = path[path.index(mod) :] + [mod]
            raise AssertionError("import circle: " + " -> ".join(cycle))
        if mod in done or mod not in graph:
            return
        for dep in sorted(graph[mod]):
            visit(dep, [*path, mod])
        done.add(mod)

    for mod in sorted(graph):
        visit(mod, [])
