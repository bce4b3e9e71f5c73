"""Shared logic of the checkpoint probes: which functions are checkpoint save/load entry points
and what their in-file call closure touches."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..unit import Func, Unit

SAVE_NAME = re.compile(
    r"(?i)^_*(save|store|write|dump)_?\w*(checkpoint|ckpt)\w*$|^_*(checkpoint|ckpt)_?\w*(save|write)\w*$"
)
LOAD_NAME = re.compile(
    r"(?i)^_*(load|restore|resume|read)_?\w*(checkpoint|ckpt)\w*$|^_*(checkpoint|ckpt)_?\w*(load|restore)\w*$|^_*resume\w*$"
)
SAVE_CALLS = frozenset(
    {"save", "save_file", "save_state_dict", "dump", "torch_save", "_save", "save_checkpoint"}
)
LOAD_CALLS = frozenset(
    {"load", "load_file", "load_state_dict", "torch_load", "_load", "load_checkpoint"}
)
# any of these in the closure means the path handles RNG state (named or as a call)
RNG_TOUCH = re.compile(
    r"rng|getstate|setstate|\bget_state\b|\bset_state\b|random_state|fork_rng|\bnp\.random\.|\brandom\.(get|set)state"
)
DATA_TOUCH = re.compile(
    r"sampler|data_?loader|consumed|data_iter|dataset_state|cursor|epoch_iter", re.I
)


_DOCSTRING = re.compile(r"(\"\"\"|\'\'\')[\s\S]*?\1")
_COMMENT = re.compile(r"#[^\n]*")


@dataclass
class CkptPath:
    func: Func
    kind: str  # "save" | "load"
    closure: list[Func]
    text: str


def checkpoint_entry(unit: Unit, f: Func) -> CkptPath | None:
    """``f`` if it is a topmost checkpoint save/load function of this file that serialises."""
    kind = "save" if SAVE_NAME.match(f.name) else "load" if LOAD_NAME.match(f.name) else None
    if kind is None:
        return None
    pattern = SAVE_NAME if kind == "save" else LOAD_NAME
    # report the outermost entry only: a same-kind caller in this file covers this one
    if any(pattern.match(c.name) and c is not f for c in unit.callers.get(f.name, ())):
        return None
    closure = unit.reachable(f)
    io = SAVE_CALLS if kind == "save" else LOAD_CALLS
    if not any(name in io for g in closure for name, _ in unit.calls_of(g)):
        return None
    text = "\n".join(unit.text(g.node) for g in closure)
    # what the code does, not what its comments and docstrings say
    text = _COMMENT.sub("", _DOCSTRING.sub("", text))
    return CkptPath(f, kind, closure, text)
