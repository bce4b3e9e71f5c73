"""Deterministic algorithms requested in a file that never sets ``CUBLAS_WORKSPACE_CONFIG``."""

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    if b"CUBLAS_WORKSPACE_CONFIG" in m.unit.src:
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note="deterministic mode is requested here, but this file never sets CUBLAS_WORKSPACE_CONFIG.",
        confidence=0.7,
    )


PROBE = Probe(
    id="nondet-cublas-workspace-missing",
    category=Category.nondeterminism,
    severity="medium",
    title="deterministic mode without CUBLAS_WORKSPACE_CONFIG",
    rationale=(
        "cuBLAS (CUDA >= 10.2) is only deterministic with CUBLAS_WORKSPACE_CONFIG=:4096:8 or "
        ":16:8 set before the first cuBLAS call; without it, deterministic mode raises or, in "
        "warn-only mode, silently stays nondeterministic."
    ),
    template="op_repeatability",
    params={"op": "matmul", "device": "cuda", "deterministic": True},
    query=(
        "(call function: [(identifier) @f (attribute attribute: (identifier) @f)] "
        '(#eq? @f "use_deterministic_algorithms") arguments: (argument_list . (true))) @anchor'
    ),
    predicate=_check,
)
