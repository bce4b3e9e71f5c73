"""The layers the code is built in (docs/architecture.md): records, errors and paths at the
bottom, importing nothing above them; probes resting on that floor alone; every module of the
project placed in one layer, none importing a higher one; no import circle anywhere.

An import is any ``import`` statement of a module's source, module level and function bodies
alike, ``if TYPE_CHECKING:`` blocks left out; ``from pkg import name`` imports ``pkg.name``
where that is a module, else ``pkg``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
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


# -- the whole project's import graph ---------------------------------------------------------

# a probe's fixtures are files the scan reads and a reproducer template a script written out
# for a place where the project may not be installed: neither is imported as a module
NOT_MODULES = {"fixtures", "templates", "__pycache__"}


def project_modules(root: Path, packages: tuple[str, ...] = OURS) -> dict[str, Path]:
    """Dotted name -> file of every module of ``packages`` under ``root`` (a package by its
    ``__init__.py``)."""
    mods: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            if NOT_MODULES & set(rel.parts):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth, but those under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, packages: tuple[str, ...] = OURS) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (see the module docstring)."""
    mods = project_modules(root, packages)

    def ours(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        deps: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = here[: len(here) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            deps |= {t for t in map(ours, targets) if t is not None and t != mod}
        graph[mod] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through imports (strongly connected
    components of more than one module), each as one concrete circle: a -> b -> ... -> a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, deps = work[-1]
            dep = next(deps, None)
            if dep is not None:
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on_stack.add(dep)
                    work.append((dep, iter(sorted(graph.get(dep, ())))))
                elif dep in on_stack:
                    low[node] = min(low[node], index[dep])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(_circle_through(graph, set(group)))
    return found


def _circle_through(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """One circle inside ``group``, from its first module back to it (breadth first)."""
    first = min(group)
    came: dict[str, str] = {}
    frontier = [first]
    while frontier:
        nxt = []
        for mod in frontier:
            for dep in sorted(graph[mod] & group):
                if dep == first:
                    path = [mod]
                    while path[-1] != first:
                        path.append(came[path[-1]])
                    return [*reversed(path), first]
                if dep not in came:
                    came[dep] = mod
                    nxt.append(dep)
        frontier = nxt
    raise AssertionError(f"no circle through {first}")  # pragma: no cover - a group has one


def _said(found: list[list[str]]) -> str:
    return "\n".join(" -> ".join(c) for c in found)


def test_layers_no_import_circle_anywhere():
    found = circles(import_graph(ROOT))
    assert not found, "import circles (function bodies included):\n" + _said(found)


# -- the layers, as docs/architecture.md draws them ------------------------------------------

LAYERS = ("bottom", "ledger", "reading", "actions", "workflow", "adapters")
# "pkg.*" places a package and every module under it, a plain name that one module; the
# most specific entry places a module. A new module must be placed here and in the drawing.
LAYER_OF = {
    "triage_agent": "bottom",
    "triage_agent.records": "bottom",
    "triage_agent.evidence_data": "bottom",
    "triage_agent.errors": "bottom",
    "triage_agent.paths": "bottom",
    "triage_agent.ledger": "ledger",
    "triage_agent.ledger_rules": "ledger",
    "triage_agent.compare.*": "reading",
    "triage_agent.correspond.*": "reading",
    "triage_agent.metrics": "reading",
    "triage_agent.metrics_plot": "reading",
    "triage_agent.manifest": "reading",
    "triage_agent.config": "reading",
    "triage_agent.trace_format": "reading",
    "triage_agent.interventions": "actions",
    "triage_agent.runs": "actions",
    "triage_agent.state_compare": "actions",
    "triage_agent.process": "actions",
    "triage_agent.process_guard": "actions",
    "triage_agent.jit_ops": "actions",
    "triage_agent.extensions_dir": "actions",
    "triage_agent.shm_buffers": "actions",
    "triage_agent.proc_files": "actions",
    "triage_agent.policies": "actions",
    "triage_agent.provenance": "actions",
    "triage_agent.settings": "actions",
    "triage_agent.seed_pins": "actions",
    "triage_agent.outplace": "actions",
    "triage_agent.restore_state": "actions",
    "triage_agent.recompute_state": "actions",
    "triage_agent.optimizer_membership": "actions",
    "triage_agent.rng_streams": "actions",
    "triage_agent.generator_hooks": "actions",
    "triage_agent.import_hooks": "actions",
    "triage_agent.site_chain": "actions",
    "triage_agent.stated_values": "actions",
    "triage_agent.call_values": "actions",
    "triage_agent.param_ties": "actions",
    "triage_agent.unique_params": "actions",
    "triage_agent.observed_hooks": "actions",
    "triage_agent.sampler_epochs": "actions",
    "triage_agent.amp_order": "actions",
    "triage_agent.returned_tensors": "actions",
    "triage_agent.empty_fill": "actions",
    "triage_agent.job_objects": "actions",
    "triage_agent.job_frames": "actions",
    "triage_agent.source_literals": "actions",
    "triage_agent.metrics_reports": "actions",
    "triage_agent.module_globals": "actions",
    "triage_agent.grad_sync": "actions",
    "triage_agent.saved_tensors": "actions",
    "triage_agent.module_structure": "actions",
    "triage_agent.fingerprint.*": "actions",
    "triage_agent.boundary_capture": "actions",
    "triage_agent.boundary_inject.*": "actions",
    "triage_agent.workflow.write_recorder": "actions",
    "triage_agent.correspond.aligners": "actions",
    "triage_agent.bisect.history": "actions",
    "triage_agent.bisect.worktree": "actions",
    "triage_agent.bisect.package": "actions",
    "triage_agent.bisect.search": "actions",
    "triage_agent.bisect.model": "actions",
    "reproducers.*": "actions",
    "probes.*": "actions",
    "triage_agent.workflow.*": "workflow",
    "triage_agent.bisect.*": "workflow",
    "triage_agent.correspond.workflow": "workflow",
    "triage_agent.correspond.align": "workflow",
    "triage_agent.correspond.candidates": "workflow",
    "triage_agent.report": "workflow",
    "triage_agent.ledger_view": "workflow",
    "triage_agent.cli.*": "adapters",
    "mcp_server.*": "adapters",
}


def layer_of(mod: str, table: dict[str, str] = LAYER_OF) -> str | None:
    if mod in table:
        return table[mod]
    under = [p for p in table if p.endswith(".*") and (mod + ".").startswith(p[:-1])]
    return table[max(under, key=len)] if under else None


def upward(graph: dict[str, set[str]], table: dict[str, str] = LAYER_OF) -> list[str]:
    """Every import of a module of a higher layer than the importer's, in words."""
    out = []
    for mod in sorted(graph):
        mine = layer_of(mod, table)
        for dep in sorted(graph[mod]):
            theirs = layer_of(dep, table)
            if mine and theirs and LAYERS.index(theirs) > LAYERS.index(mine):
                out.append(f"{mod} ({mine}) imports {dep} ({theirs})")
    return out


def test_layers_every_module_is_placed_in_one_layer():
    mods = project_modules(ROOT)
    unplaced = sorted(m for m in mods if layer_of(m) is None)
    assert not unplaced, f"place these in LAYER_OF and in docs/architecture.md: {unplaced}"
    assert set(LAYER_OF.values()) <= set(LAYERS)
    below = {m.rpartition(".")[0] + ".*" for m in mods}  # a folder without __init__.py too
    stale = [p for p in LAYER_OF if p.removesuffix(".*") not in mods and p not in below]
    assert not stale, f"LAYER_OF names what is no module or package: {stale}"


def test_layers_no_module_imports_a_higher_layer():
    found = upward(import_graph(ROOT))
    assert not found, "imports of a higher layer:\n" + "\n".join(found)


def _drawing() -> dict[str, str]:
    """docs/architecture.md's layer drawing: layer -> the text of its band."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    drawing = text.split("```text\n", 1)[1].split("```", 1)[0]
    bands: dict[str, str] = {}
    layer = None
    for line in drawing.splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        if first in LAYERS:
            layer = first
        if layer is not None and not line.lstrip().startswith("─"):
            bands[layer] = bands.get(layer, "") + line + "\n"
    return bands


def test_layers_the_table_is_the_drawing():
    """Each entry of LAYER_OF is named in its own layer's band of the drawing: a module as
    ``name.py``, a package as ``name/``."""
    bands = _drawing()
    assert set(bands) == set(LAYERS)
    missing = []
    for entry, layer in LAYER_OF.items():
        if entry == "triage_agent":
            continue  # the package's own __init__: a docstring and a version
        last = entry.removesuffix(".*").rpartition(".")[2]
        shown = f"{last}/" if entry.endswith(".*") else f"{last}.py"
        if shown not in bands[layer]:
            missing.append(f"{shown} ({layer})")
    assert not missing, f"not drawn in their layer in docs/architecture.md: {missing}"


# -- the checker itself, on a planted package ------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> None:
    for rel, src in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(src)


def test_layers_checker_finds_a_circle_closed_inside_a_function(tmp_path):
    _plant(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def f():\n    from pkg.a import g\n    return g\n",
            "pkg/c.py": "from .a import name_not_a_module\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == {"pkg.a"}
    assert _said(circles(graph)) == "pkg.a -> pkg.b -> pkg.a"


def test_layers_checker_leaves_out_type_checking_imports(tmp_path):
    _plant(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n",
            "pkg/b.py": "import pkg.a\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == set() and circles(graph) == []


def test_layers_checker_finds_an_upward_import(tmp_path):
    _plant(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "def f():\n    from .high import g\n    return g\n",
            "pkg/high/__init__.py": "",
            "pkg/high/g.py": "from pkg import low\n",
        },
    )
    table = {"pkg": "bottom", "pkg.low": "bottom", "pkg.high.*": "workflow"}
    graph = import_graph(tmp_path, ("pkg",))
    assert layer_of("pkg.high.g", table) == "workflow" and layer_of("pkg.other", table) is None
    assert upward(graph, table) == ["pkg.low (bottom) imports pkg.high.g (workflow)"]
