"""Where in the job's own source a value seen at run time was spelled: the dict literal that
lists a checkpoint's keys, the f-string that builds a file's name.

A restore proves *what* a resume lost (gradients a checkpoint leaves out, a file that holds
an older step's state); the line to fix is where the checkpoint's contents or its name are
decided, which is seldom on the stack when the file is written or read (a trainer's method
that returned the list, a helper that returned the name). Those lines spell the keys and the
name pattern as literals, so they are found by reading the job's modules. A value spelled in
several places names none of them: no guess.

Used by the code injected into a job's processes; standard library only.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from functools import cache

_LIBS = ("site-packages", "dist-packages", os.sep + "triage_agent" + os.sep)


def job_sources() -> list[str]:
    """The Python files of the job's own modules loaded in this process (below the working
    directory, outside installed packages), its script included."""
    from .job_objects import job_modules

    root = os.getcwd().rstrip(os.sep) + os.sep
    files = {os.path.abspath(sys.argv[0])} if sys.argv and sys.argv[0].endswith(".py") else set()
    files = {f for f in files if f.startswith(root) and not any(s in f for s in _LIBS)}
    return sorted(files | {m.__file__ for m in job_modules().values()})


@cache
def _tree(path: str) -> ast.AST | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


def _nodes(files: list[str]):
    for path in files:
        tree = _tree(path)
        if tree is not None:
            for node in ast.walk(tree):
                yield path, node


def listing_site(keys: list[str], files: list[str]) -> str | None:
    """'file:line' of the one dict literal (or ``dict(...)`` call) whose constant keys are
    exactly ``keys``: the place that lists what a saved mapping holds. None when no literal,
    or more than one, spells them."""
    want = set(keys)
    if len(want) < 2:
        return None  # one key is too common a spelling to name a place by
    found = []
    for path, node in _nodes(files):
        have: set[str] | None = None
        if isinstance(node, ast.Dict) and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys
        ):
            have = {k.value for k in node.keys}  # type: ignore[union-attr]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
            and not node.args
            and all(k.arg for k in node.keywords)
        ):
            have = {k.arg for k in node.keywords}  # type: ignore[misc]
        if have == want:
            found.append(f"{path}:{node.lineno}")
    return found[0] if len(found) == 1 else None


def _pattern(node: ast.JoinedStr) -> re.Pattern[str] | None:
    """A regular expression for what an f-string can produce, when it spells enough of it."""
    parts, fixed = [], 0
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(re.escape(v.value))
            fixed += len(v.value)
        else:
            parts.append(".+?")
    if fixed < 3 or all(p == ".+?" for p in parts):
        return None
    return re.compile("".join(parts))


_FIELD = re.compile(r"\{[^{}]*\}|%[-+ #0]*\d*(?:\.\d+)?[sdifgeExXr]")


def _template(text: str) -> re.Pattern[str] | None:
    """A regular expression for what a ``str.format`` or ``%`` template can produce."""
    pieces = _FIELD.split(text)
    fixed = sum(len(p) for p in pieces)
    if len(pieces) < 2 or fixed < 3:
        return None
    return re.compile(".+?".join(re.escape(p) for p in pieces))


def _producer(node: ast.AST) -> re.Pattern[str] | None:
    """What a node that builds a string from a template can produce: an f-string, a
    ``"...".format(...)`` call, a ``"..." % ...`` expression."""
    if isinstance(node, ast.JoinedStr):
        return _pattern(node)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return _template(node.func.value.value)
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    ):
        return _template(node.left.value)
    return None


def name_site(name: str, files: list[str]) -> str | None:
    """'file:line' of the one template in the job's source (an f-string, a ``.format`` or
    ``%`` template) that can produce the file name ``name`` entire: the line that names a
    file. None when none or several can."""
    found = []
    for path, node in _nodes(files):
        pat = _producer(node)
        if pat is not None and pat.fullmatch(name):
            found.append(f"{path}:{node.lineno}")
    found = sorted(set(found))
    return found[0] if len(found) == 1 else None


_UNSET = object()


def global_writes(path: str, name: str) -> list[tuple[int, str | None, object]]:
    """Each assignment to the module global ``name`` in the file: (line, the function it is
    in, None at module level; the constant it assigns, else a marker for none). Augmented
    assignments count as writes with no constant."""
    tree = _tree(path)
    if tree is None:
        return []
    out: list[tuple[int, str | None, object]] = []

    def visit(node: ast.AST, func: str | None, declared: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                said = any(isinstance(g, ast.Global) and name in g.names for g in ast.walk(child))
                visit(child, child.name, said)
                continue
            if isinstance(child, ast.ClassDef):
                continue  # a class body's names are the class's, not the module's
            mine = func is None or declared
            if mine and isinstance(child, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    value = _UNSET
                    if isinstance(child, ast.Assign | ast.AnnAssign) and isinstance(
                        child.value, ast.Constant
                    ):
                        value = child.value.value
                    out.append((child.lineno, func, value))
            visit(child, func, declared)

    visit(tree, None, False)
    return out


def reset_site(path: str, name: str, value: object) -> str | None:
    """'file:line' of the write that most likely left the global at ``value`` in a process
    that resumed: a function's assignment of that very constant (a set-up that starts it
    again), else the module's own (the import's initial value), else a function's plain
    assignment. None when the file never assigns it."""
    writes = global_writes(path, name)
    ranked = (
        [w for w in writes if w[1] is not None and w[2] is not _UNSET and w[2] == value]
        + [w for w in writes if w[1] is None and w[2] is not _UNSET and w[2] == value]
        + [w for w in writes if w[1] is not None and w[2] is not _UNSET]
    )
    return f"{path}:{ranked[0][0]}" if ranked else None
