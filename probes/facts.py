"""Shared vocabulary and file-level facts the probe predicates use.

Names here are the simple (last-component) names of calls, as the file's call graph holds
them; patterns are deliberately narrow, since a probe that flags every ``.float()`` is noise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tree_sitter import Node

from .unit import Func, Unit

COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_reduce_coalesced",
        "allreduce",
        "inference_all_reduce",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "reduce_scatter_coalesced",
        "reduce_scatter_fn",
        "_reduce_scatter_base",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_coalesced",
        "allgather_fn",
        "_all_gather_base",
        "broadcast",
        "all_to_all",
        "all_to_all_single",
        "gather",
        "scatter",
    }
)

INIT_RE = re.compile(
    r"^(__init__|__post_init__|_?init(ialize)?(_\w+)?|_?configure\w*|_?setup\w*|_?set_up\w*|_?build_optimizer\w*)$"
)
# a dtype expression that names a 16-bit float (or a communication dtype, which exists to be one)
LOWP_DTYPE = (
    r"(torch\.)?(bfloat16|float16|half|bf16|fp16)\b|communication_data_type|comm_dtype|reduce_dtype"
)
DOWNCAST_RE = re.compile(
    r"\.(half|bfloat16)\(\s*\)|\.to\([^()]*("
    + LOWP_DTYPE
    + r")[^()]*\)|\.type\([^()]*(HalfTensor|BFloat16Tensor)"
)
UPCAST_RE = re.compile(
    r"\.float\(\s*\)|\.to\([^()]*(torch\.float32|torch\.float\b|\w*orig\w*dtype|\w+\.dtype)[^()]*\)|\.copy_\("
)
STEP_NAME_RE = re.compile(
    r"^_?(step|steps|step_count|_step_count|global_step|global_steps|num_steps|n_steps)$"
)
GRAD_WORD_RE = re.compile(
    r"(^|[._\[])(grad|grads|gradient|gradients|main_grad|grad_acc\w*|\w*_grad|\w*_grads)($|[._\[])"
)
NOT_GRAD_RE = re.compile(
    r"requires_grad|grad_norm|grad_fn|grad_scal|norm_grad|grad_count|clip_grad"
)


def is_init_name(name: str) -> bool:
    return bool(INIT_RE.match(name))


def func_text(unit: Unit, f: Func) -> str:
    return unit.text(f.node)


def lines_of(unit: Unit, f: Func) -> list[tuple[int, str]]:
    return [(f.start_line + i, s) for i, s in enumerate(unit.lines[f.start_line - 1 : f.end_line])]


def init_reach(unit: Unit) -> dict[int, str]:
    """id(Func) -> the init-like function it is reached from (itself if init-like)."""
    cached = unit.cache.get("init_reach")
    if isinstance(cached, dict):
        return cached
    out: dict[int, str] = {}
    for f in unit.functions:
        if is_init_name(f.name):
            for g in unit.reachable(f):
                out.setdefault(id(g), f.qualname)
    unit.cache["init_reach"] = out
    return out


def collective_lines(unit: Unit, f: Func) -> list[int]:
    return [Unit.line(n) for name, n in unit.calls_of(f) if name in COLLECTIVES]


def enclosing_loop(node: Node) -> Node | None:
    """The nearest for/while loop around ``node`` inside the same function."""
    p = node.parent
    while p is not None and p.type not in ("function_definition", "class_definition", "module"):
        if p.type in ("for_statement", "while_statement"):
            return p
        p = p.parent
    return None


def is_grad_text(text: str) -> bool:
    return bool(GRAD_WORD_RE.search(text)) and not NOT_GRAD_RE.search(text)


def lowp_name(text: str) -> str:
    return "bfloat16" if re.search(r"bfloat16|bf16", text) else "float16"


def any_of(capture: str, names: Iterable[str]) -> str:
    """A tree-sitter ``#any-of?`` predicate, so the filtering happens inside the query."""
    return f"(#any-of? @{capture} " + " ".join(f'"{n}"' for n in sorted(names)) + ")"
