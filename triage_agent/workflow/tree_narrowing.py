"""A proven path setting narrowed to the hunks that carry it.

A run that takes its own package from a directory named by a path-valued variable (run A
``PYTHONPATH=v1``, run B ``PYTHONPATH=v2``: version N and version N+1 side by side) differs
by whatever differs between the two trees. Once giving B A's value is proven to make every
step match, the two trees become two commits of a throwaway repository in the workspace (A's
tree, then B's) and the bisection's hunk search runs on them: B rerun with hunks of the diff
reverted, put first on its path, until the smallest set whose revert restores every step is
found and proven by one more rerun. Each hunk is then named in B's tree as the run names it
(``v2/pkg/model.py:20``).

What this finds is the smallest change of B's tree that gives back A's bits. Where a change
in one file exposes a fragile reader in another (a rename that a name filter elsewhere no
longer matches), it names the change, not the reader: the verdict says which rule chose.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError
from ..ledger import Ledger
from ..paths import under_run
from ..records import Case, Classification, Hypothesis, HypothesisStatus, RunSpec
from .arms import Arm
from .fixcheck import SourceChange, bisect_source_change

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".triage")


def _dir(value: str, run: RunSpec) -> Path | None:
    p = Path(value)
    if not p.is_absolute():
        p = Path(run.cwd or ".") / p
    return p.resolve() if p.is_dir() else None


def tree_pair(case: Case, key: str) -> tuple[Path, Path, str] | None:
    """(A's directory, B's directory, B's entry as the run names it) when the runs' values
    of ``key`` are path lists that differ in exactly one entry, a directory in both; else
    None (nothing to narrow, or more than one pair of trees)."""
    a, b = case.run_a.env.get(key), case.run_b.env.get(key)
    if not a or not b:
        return None
    ea, eb = a.split(os.pathsep), b.split(os.pathsep)
    if len(ea) != len(eb):
        return None
    pairs = [(x, y) for x, y in zip(ea, eb, strict=True) if x != y]
    if len(pairs) != 1:
        return None
    x, y = pairs[0]
    da, db = _dir(x, case.run_a), _dir(y, case.run_b)
    if da is None or db is None or da == db:
        return None
    return da, db, y


def _fill(root: Path, tree: Path) -> None:
    for child in root.iterdir():
        if child.name == ".git":
            continue
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    shutil.copytree(tree, root, ignore=_IGNORED, dirs_exist_ok=True)


def trees_repo(workspace: Path, a_dir: Path, b_dir: Path) -> tuple[Path, str, str]:
    """A repository of two commits, A's tree then B's, made once per pair of trees and
    their content: (its path, A's commit, B's commit)."""
    import git

    digest = hashlib.sha256()
    for tree in (a_dir, b_dir):
        for f in sorted(tree.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                digest.update(str(f.relative_to(tree)).encode() + b"\0" + f.read_bytes())
        digest.update(b"\1")
    root = workspace / "trees" / digest.hexdigest()[:16]
    marker = root / ".git" / "triage-trees"
    if marker.exists():
        a, b = marker.read_text().split()
        return root, a, b
    if root.exists():
        shutil.rmtree(root)  # a repository left half made
    root.mkdir(parents=True)
    repo = git.Repo.init(root)
    who = git.Actor("bitwise-triage", "triage@localhost")
    shas = []
    for label, tree in (("A", a_dir), ("B", b_dir)):
        _fill(root, tree)
        repo.git.add(A=True)
        commit = repo.index.commit(f"run {label}'s tree: {tree}", author=who, committer=who)
        shas.append(commit.hexsha)
    marker.write_text(" ".join(shas))
    return root, shas[0], shas[1]


def narrow_tree_change(
    case: Case,
    ledger: Ledger,
    key: str,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> SourceChange | None:
    """Bisect the hunks between the two trees ``key`` names; None (noted) when there is no
    pair of trees or no proven set of hunks."""
    pair = tree_pair(case, key)
    if pair is None:
        return None
    a_dir, b_dir, b_entry = pair
    try:
        root, a, b = trees_repo(Path(ledger.workspace), a_dir, b_dir)
    except (OSError, InputError) as exc:
        ledger.note(f"the trees {a_dir} and {b_dir} could not be compared: {exc}", level="warning")
        return None
    ledger.note(
        f"{key} differs by one directory ({a_dir} in A, {b_dir} in B): its two trees are "
        f"bisected as two commits of {root}, B's hunks reverted on B's path until every "
        "step matches"
    )
    prefix = b_entry.rstrip("/\\")
    found = bisect_source_change(
        case,
        ledger,
        timeout_s=timeout_s,
        deadline=deadline,
        on_status=on_status,
        repo=root,
        rev_range=f"{a}..{b}",
        extra_roots=[root],
        place=lambda loc: f"{prefix}/{loc}",
        same_job_without=key,
        # two trees are one commit: every change its own hunk, so the one that carries the
        # difference is not merged with its neighbours (a docstring, a signature)
        context=0,
    )
    if found is not None and (gone := _brought_back(found.diffs)):
        # the set that gives back A's bits runs A's own module again (B's tree moved or
        # removed it): that is what giving B A's path proved already, not a place in B
        ledger.update_hypothesis(
            found.hypothesis.id,
            status=HypothesisStatus.inconclusive,
            reason=f"the hunks bring back {', '.join(gone)}, which B's tree no longer has: "
            "B then runs A's code for it, and no change of B's is singled out",
        )
        ledger.note(
            f"the smallest set of hunks that gives back A's bits brings back "
            f"{', '.join(gone)}, a file B's tree moved or removed: B then runs A's module, "
            f"which {key}={case.run_a.env.get(key)} proved already; no hunk is named",
            level="warning",
        )
        return None
    return _renamed_reader(ledger, found, b_dir, prefix)


def _brought_back(diffs: list[str]) -> list[str]:
    """Files a set of hunks re-creates: removed in B's tree (``+++ /dev/null`` from A to B)."""
    out = []
    for d in diffs:
        if "\n+++ /dev/null" in d:
            m = re.search(r"^--- a/(\S+)", d, re.M)
            out.append(m.group(1) if m else "a file")
    return out


def selected_files(case: Case, trace_dirs: dict[str, str]) -> tuple[Path, Path] | None:
    """(A's file, B's file): the one source file of the job's own that each run alone calls
    into, as the trace of the two runs records its events' call sites; None unless there is
    exactly one each. A setting that selects one of two implementations of the job
    (``--trainer v2`` importing ``trainers/v2.py`` where A runs ``trainers/v1.py``) shows so."""
    from ..compare.reader import read_native
    from ..errors import TriageError

    seen: dict[str, set[Path]] = {}
    for run, spec in (("a", case.run_a), ("b", case.run_b)):
        root = Path(spec.cwd or ".").resolve()
        try:
            trace = read_native(Path(trace_dirs[run]))
        except (KeyError, TriageError, OSError):
            return None
        files: set[Path] = set()
        for stream in list(trace.ranks.values())[:1]:
            for i in range(min(len(stream), MAX_EVENTS)):
                caller = stream.event(i).caller
                if not caller:
                    continue
                f = Path(caller.rpartition(":")[0])
                f = (f if f.is_absolute() else root / f).resolve()
                if f.suffix == ".py" and f.is_relative_to(root):
                    files.add(f)
        seen[run] = files
    only_a, only_b = seen["a"] - seen["b"], seen["b"] - seen["a"]
    if len(only_a) != 1 or len(only_b) != 1:
        return None
    a, b = only_a.pop(), only_b.pop()
    return (a, b) if a.is_file() and b.is_file() else None


MAX_EVENTS = 200_000  # events read per run for their call sites


def narrow_file_change(
    case: Case,
    ledger: Ledger,
    a_file: Path,
    b_file: Path,
    *,
    selector: str,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> SourceChange | None:
    """Bisect the hunks between the two files of the job the setting ``selector`` selects
    (A's and B's): B's working directory becomes two commits of a throwaway repository,
    first with B's file holding A's text, then as it is, and B (its settings kept) is rerun
    inside it with hunks reverted until every step matches. Each hunk is named in B's file
    as the job names it (``trainers/v2.py:28``). The two files are two revisions of one
    implementation, as two trees are: the selector is not a setting that asks for other
    arithmetic, and the change is classified as a source change between revisions."""
    b_root = Path(case.run_b.cwd or ".").resolve()
    workspace = Path(ledger.workspace).resolve()
    rel = b_file.relative_to(b_root)
    base = workspace / "files" / hashlib.sha256(f"{a_file}|{b_file}".encode()).hexdigest()[:16]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".triage", workspace.name)
    try:
        if base.exists():
            shutil.rmtree(base)
        for side in ("a", "b"):
            shutil.copytree(b_root, base / side, ignore=ignore)
        (base / "a" / rel).write_bytes(a_file.read_bytes())
        root, a, b = trees_repo(workspace, base / "a", base / "b")
    except (OSError, InputError) as exc:
        ledger.note(
            f"the files {a_file} and {b_file} could not be compared: {exc}", level="warning"
        )
        return None
    finally:
        shutil.rmtree(base, ignore_errors=True)
    ledger.note(
        f"the runs call into one file of the job's own each ({under_run(str(a_file), str(b_root))} "
        f"in A, {rel} in B): B's directory is bisected as two commits of {root} (B's file "
        "holding A's text, then as it is), B rerun inside it with hunks reverted until every "
        "step matches"
    )
    inside = case.model_copy(update={"run_b": case.run_b.model_copy(update={"cwd": str(root)})})
    return bisect_source_change(
        inside,
        ledger,
        timeout_s=timeout_s,
        deadline=deadline,
        on_status=on_status,
        repo=root,
        rev_range=f"{a}..{b}",
        extra_roots=[root],
        same_job_without=selector,
        context=0,
        record=False,
    )


def _renamed_reader(
    ledger: Ledger, found: SourceChange | None, b_dir: Path, prefix: str
) -> SourceChange | None:
    """The smallest change that gives back A's bits only renames identifiers: a rename is no
    arithmetic, so what carries the difference is the code that still reads the old name as
    a string (a filter by parameter name, a key lookup). That reader is the place, when B's
    tree holds one; otherwise the hunks stay the place and the verdict says it is a rename."""
    if found is None:
        return None
    mapping = renames(found.diffs)
    if mapping is None:
        return found
    old = {k for k in mapping if "\0" not in k and len(k) > 1}
    hunks = {loc.split(" (")[0].removeprefix(prefix + "/") for loc in found.location.split("; ")}
    readers = name_readers(b_dir, old, hunks) if old else []
    said = ", ".join(sorted({f"{k} -> {v}" for k, v in mapping.items() if "\0" not in k}))
    if not readers:
        ledger.note(
            f"the proven hunks only rename ({said}); no string in B's tree holds an old name, "
            "so the rename itself stays the place"
        )
        return found
    file, line, name = readers[0]
    where = (
        f"{prefix}/{file}:{line} (still selects by the old name '{name}', which the rename "
        f"{said} at {found.location.split(' (')[0]} took away)"
    )
    ledger.note(
        f"the smallest change that gives back A's bits only renames ({said}): a rename is "
        f"no arithmetic, and {prefix}/{file}:{line} still matches the old name '{name}' as a "
        "string; it is named as the place, the rename as what exposed it"
    )
    hyp = ledger.update_hypothesis(
        found.hypothesis.id,
        rationale=f"{where}. {found.hypothesis.rationale}",
    )
    return found.model_copy(update={"hypothesis": hyp, "location": where})


_WORD = re.compile(r"[A-Za-z_]\w*")


def renames(diffs: list[str]) -> dict[str, str] | None:
    """old -> new when every hunk only renames identifiers (each removed line becomes an added
    line whose words differ only by one consistent substitution); None otherwise."""
    mapping: dict[str, str] = {}
    for diff in diffs:
        body = [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        old = [ln[1:] for ln in body if ln.startswith("-")]
        new = [ln[1:] for ln in body if ln.startswith("+")]
        if not old or len(old) != len(new):
            return None
        for a, b in zip(old, new, strict=True):
            wa, wb = _WORD.findall(a), _WORD.findall(b)
            if len(wa) != len(wb) or _WORD.sub("", a).split() != _WORD.sub("", b).split():
                return None
            for x, y in zip(wa, wb, strict=True):
                if x != y and mapping.setdefault(x, y) != y and not _also(mapping, x, y):
                    return None
    return mapping or None


def _also(mapping: dict[str, str], old: str, new: str) -> bool:
    # one old name may become several new ones (a block's norm -> ln, the final norm -> ln_f)
    mapping[f"{old}\0{new}"] = new
    return True


def name_readers(tree: Path, old_names: set[str], skip: set[str]) -> list[tuple[str, int, str]]:
    """(file, line, the old name) of each place in ``tree`` that compares against a string
    holding an old name as a whole word: the string itself when it is used where it stands,
    else each use of the name it is bound to. Docstrings and the ``skip`` files' renamed
    lines are left out."""
    pattern = re.compile(
        r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, sorted(old_names))) + r")(?![A-Za-z0-9_])"
    )
    out: list[tuple[str, int, str]] = []
    for f in sorted(tree.rglob("*.py")):
        rel = str(f.relative_to(tree))
        try:
            mod = ast.parse(f.read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        docs = {
            id(n.value)
            for n in ast.walk(mod)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        bound: dict[str, tuple[int, str]] = {}
        for node in ast.walk(mod):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            m = pattern.search(node.value)
            if m is None or id(node) in docs or f"{rel}:{node.lineno}" in skip:
                continue
            owner = next(
                (
                    a
                    for a in ast.walk(mod)
                    if isinstance(a, ast.Assign)
                    and any(c is node for c in ast.walk(a.value))
                    and len(a.targets) == 1
                    and isinstance(a.targets[0], ast.Name)
                ),
                None,
            )
            if owner is None:
                out.append((rel, node.lineno, m.group(1)))
            else:
                bound[owner.targets[0].id] = (node.lineno, m.group(1))  # type: ignore[attr-defined]
        for node in ast.walk(mod):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound:
                out.append((rel, node.lineno, bound[node.id][1]))
    return sorted(set(out))


_NEW_FILE = re.compile(r"^\+\+\+ b/(.+)$", re.M)
_NEW_LINES = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """(qualified name, first line, last line) of each function defined in a Python file
    that returns a value."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                gives = any(
                    isinstance(n, ast.Return) and n.value is not None for n in ast.walk(child)
                )
                if gives:  # a function that returns nothing hands out no tensor
                    out.append((name, child.lineno, child.end_lineno or child.lineno))
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def hunk_function_arms(case: Case, key: str, found: SourceChange) -> list[Arm]:
    """A proven set of hunks read through the functions they change: each function whose
    body a hunk touches, its callers handed copies of the tensors it returns
    (``copy-returns``). A cache that hands out its own tensor, written by a caller in place,
    is proven by that and named at the line that returned it; a hunk's first line is only
    where the change begins."""
    pair = tree_pair(case, key)
    if pair is None:
        return []
    _, b_dir, _ = pair
    arms: list[Arm] = []
    for diff in found.diffs:
        file = _NEW_FILE.search(diff)
        span = _NEW_LINES.search(diff)
        if file is None or span is None or not file.group(1).endswith(".py"):
            continue
        first = int(span.group(1))
        last = first + max(int(span.group(2) or 1), 1) - 1
        module = file.group(1).removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        for name, lo, hi in _functions(b_dir / file.group(1)):
            if hi < first or lo > last or "<locals>" in name:
                continue
            target = f"{module}:{name}"
            if any(a.intervention == f"copy-returns {target}" for a in arms):
                continue
            hid = "H-" + hashlib.sha256(f"copy-returns|{target}".encode()).hexdigest()[:10]
            arms.append(
                Arm(
                    hypothesis=Hypothesis(
                        id=hid,
                        statement=f"{target}, which the proven change rewrites, hands its "
                        "callers a tensor they then write in place, and that reaches later "
                        "calls",
                        category="inplace-write",
                        rationale="the change is proven; running B with its callers given "
                        f"copies of what {target} returns tests whether the shared tensor "
                        "carries it",
                        classification=Classification.bug,
                    ),
                    intervention=f"copy-returns {target}",
                    run="b",
                    kind="inplace-write",
                    location=f"{b_dir.name}/{file.group(1)}:{lo} ({name})",
                )
            )
    return arms[:2]
