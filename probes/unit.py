"""One parsed file as the probes see it: its language, tree, text and lines, its functions and
their own call graph (intra-file, by simple name), computed lazily.

Limits: the call graph is intra-file and resolved by simple name (``self.f()`` and ``f()``
both reach ``def f``); dynamic dispatch, inheritance across files and aliases are not
followed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import tree_sitter as ts
import tree_sitter_cpp as tscpp
import tree_sitter_python as tspy

Lang = Literal["python", "cpp"]

LANGUAGES: dict[Lang, ts.Language] = {
    "python": ts.Language(tspy.language()),
    "cpp": ts.Language(tscpp.language()),
}
EXTENSIONS: dict[str, Lang] = {
    ".py": "python",
    ".pyi": "python",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".cu": "cpp",
    ".cuh": "cpp",
    ".h": "cpp",
    ".hpp": "cpp",
}

_FUNC_TYPES = {"function_definition"}
_CLASS_TYPES = {"class_definition", "class_specifier", "struct_specifier"}


def lang_for(path: str) -> Lang | None:
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None


@dataclass
class Func:
    """A function definition: qualified name (Class.method), span, parameter names."""

    name: str
    qualname: str
    node: ts.Node
    start_line: int
    end_line: int
    params: list[str]
    calls: list[tuple[str, ts.Node]] = field(default_factory=list)
    local_calls: set[str] = field(default_factory=set)  # f(), self.f(), cls.f(): followed


class Unit:
    """One parsed file: source bytes, tree, and lazily computed facts."""

    def __init__(self, path: str, lang: Lang, src: bytes, parser: ts.Parser) -> None:
        self.path = path
        self.lang = lang
        self.src = src
        self.tree = parser.parse(src)
        self.root = self.tree.root_node
        self.cache: dict[str, object] = {}  # per-file facts computed by predicates
        self._calls_done = False

    # -- text and positions -------------------------------------------------------------
    def text(self, node: ts.Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    @staticmethod
    def line(node: ts.Node) -> int:
        return node.start_point[0] + 1

    @staticmethod
    def end_line(node: ts.Node) -> int:
        return node.end_point[0] + 1

    @cached_property
    def lines(self) -> list[str]:
        return self.src.decode("utf-8", "replace").splitlines()

    def snippet(self, start: int, end: int, limit: int = 4) -> str:
        end = min(end, start + limit - 1)
        return "\n".join(self.lines[start - 1 : end])

    @cached_property
    def first_error_line(self) -> int | None:
        if not self.root.has_error:
            return None
        stack = [self.root]
        while stack:
            n = stack.pop()
            if n.is_error or n.is_missing:
                return self.line(n)
            stack.extend(
                c for c in reversed(n.children) if c.has_error or c.is_error or c.is_missing
            )
        return self.line(self.root)

    # -- functions and the file's own call graph ----------------------------------------
    @cached_property
    def functions(self) -> list[Func]:
        # the query runs in C; only the few ancestors of each definition are walked in Python
        out: list[Func] = []
        for _, caps in ts.QueryCursor(DEF_QUERY[self.lang]).matches(self.root):
            for node in caps.get("f", ()):
                name = self._func_name(node)
                scope: list[str] = []
                p = node.parent
                while p is not None:
                    if p.type in _FUNC_TYPES:
                        scope.append(self._func_name(p))
                    elif p.type in _CLASS_TYPES:
                        n = p.child_by_field_name("name")
                        scope.append(self.text(n) if n else "?")
                    p = p.parent
                out.append(
                    Func(
                        name=name,
                        qualname=".".join((*reversed(scope), name)),
                        node=node,
                        start_line=self.line(node),
                        end_line=self.end_line(node),
                        params=self._params(node),
                    )
                )
        out.sort(key=lambda f: f.node.start_byte)
        return out

    def _func_name(self, node: ts.Node) -> str:
        if self.lang == "python":
            n = node.child_by_field_name("name")
            return self.text(n) if n else "?"
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.child_by_field_name("declarator") is not None:
            decl = decl.child_by_field_name("declarator")
        return self.text(decl) if decl is not None else "?"

    def _params(self, node: ts.Node) -> list[str]:
        if self.lang != "python":
            return []
        ps = node.child_by_field_name("parameters")
        names: list[str] = []
        for p in ps.named_children if ps else []:
            if p.type == "identifier":
                names.append(self.text(p))
            else:
                ident = next((c for c in p.named_children if c.type == "identifier"), None)
                if ident is not None:
                    names.append(self.text(ident))
        return [n for n in names if n not in ("self", "cls")]

    def enclosing_function(self, node: ts.Node) -> Func | None:
        starts = self._func_starts
        i = bisect.bisect_right(starts, node.start_byte) - 1
        while i >= 0:
            f = self.functions[i]
            if f.node.end_byte >= node.end_byte:
                return f
            i -= 1
        return None

    @cached_property
    def _func_starts(self) -> list[int]:
        return [f.node.start_byte for f in self.functions]

    @cached_property
    def by_name(self) -> dict[str, list[Func]]:
        idx: dict[str, list[Func]] = {}
        for f in self.functions:
            idx.setdefault(f.name, []).append(f)
        return idx

    def _index_calls(self) -> None:
        self._calls_done = True
        q = CALL_QUERY[self.lang]
        for _, caps in ts.QueryCursor(q).matches(self.root):
            recv = caps.get("recv")
            local = not recv or self.text(recv[0]) in ("self", "cls", "this")
            for n in caps.get("name", []):
                f = self.enclosing_function(n)
                if f is not None:
                    name = self.text(n)
                    f.calls.append((name, n))
                    if local:
                        f.local_calls.add(name)

    def calls_of(self, func: Func) -> list[tuple[str, ts.Node]]:
        """Calls made in ``func``'s own body (not in nested defs), by simple name."""
        if not self._calls_done:
            self._index_calls()
        return func.calls

    def reachable(self, func: Func, depth: int = 6) -> list[Func]:
        """``func`` plus the functions of this file it reaches by ``f()``/``self.f()`` calls."""
        seen = {id(func)}
        order = [func]
        frontier = [func]
        for _ in range(depth):
            nxt: list[Func] = []
            for f in frontier:
                self.calls_of(f)
                for name in f.local_calls:
                    for g in self.by_name.get(name, ()):
                        if id(g) not in seen:
                            seen.add(id(g))
                            order.append(g)
                            nxt.append(g)
            frontier = nxt
            if not frontier:
                break
        return order

    @cached_property
    def callers(self) -> dict[str, list[Func]]:
        """Simple name -> the functions of this file that call it."""
        out: dict[str, list[Func]] = {}
        for f in self.functions:
            self.calls_of(f)
            for name in f.local_calls:
                out.setdefault(name, []).append(f)
        return out


DEF_QUERY: dict[Lang, ts.Query] = {
    "python": ts.Query(LANGUAGES["python"], "(function_definition) @f"),
    "cpp": ts.Query(LANGUAGES["cpp"], "(function_definition) @f"),
}
CALL_QUERY: dict[Lang, ts.Query] = {
    "python": ts.Query(
        LANGUAGES["python"],
        "(call function: [(identifier) @name (attribute object: (_) @recv attribute: (identifier) @name)])",
    ),
    "cpp": ts.Query(
        LANGUAGES["cpp"],
        "(call_expression function: [(identifier) @name (field_expression argument: (_) @recv field: (field_identifier) @name)"
        " (qualified_identifier name: (identifier) @name)])",
    ),
}
