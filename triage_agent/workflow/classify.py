"""What each hypothesis category means for a verdict and which policy tests its fix.

The mapping is a statement of the project's contract, not knowledge of any case:
- rng-state, optimizer-init, collectives: the run did something the uninterrupted or
  reference run did not (lost state, an extra update, a race): a bug.
- casts, accumulation: a different but valid arithmetic order or precision: a
  numerical-policy difference, to be matched (or accepted) deliberately.
- nondeterminism: a kernel whose result depends on scheduling: a bug against the
  repeatability contract, fixed by deterministic algorithms.
- environment: a difference in versions or variables between the runs.
- source-change: reverting one changed file alone makes every step match; which file is
  proven, whether its new arithmetic is wrong is not: unknown until someone reads it.
"""

from __future__ import annotations

import re

from ..records import Classification

CLASSIFICATION: dict[str, Classification] = {
    "rng-state": Classification.bug,
    "optimizer-init": Classification.bug,
    "collectives": Classification.bug,
    "nondeterminism": Classification.bug,
    "casts": Classification.policy_difference,
    "accumulation": Classification.policy_difference,
    "environment": Classification.environment,
}

FIX_POLICY: dict[str, str] = {
    "rng-state": "restore-rng",
    "nondeterminism": "deterministic",
}

FIX_TEXT: dict[str, str] = {
    "source-change": "read the change to that file: if the new arithmetic is intended, adopt it in "
    "the reference as the declared numerical policy; if not, revert it",
    "rng-state": "save every RNG stream (python, numpy, torch CPU, each CUDA device, model-parallel "
    "trackers) and the data cursor with the checkpoint, and restore them bitwise on load",
    "nondeterminism": "enable torch.use_deterministic_algorithms(True) with CUBLAS_WORKSPACE_CONFIG, or "
    "replace the atomic kernel by a fixed-order reduction",
    "casts": "keep the reduced value in fp32 until it is accumulated (drop the low-precision round "
    "trip), or adopt the reference's cast placement as the declared numerical policy",
    "accumulation": "accumulate in the reference's order and dtype (or declare the new order a policy)",
    "optimizer-init": "make optimizer initialisation side-effect free: no step, decay or counter advance before the first real step",
    "collectives": "wait on async handles before reading their buffers; record_stream buffers handed to other streams; guard empty contributions",
    "environment": "align the environment (versions and numerics variables) between the runs",
}

_RANDOM_OPS = re.compile(
    r"dropout|bernoulli|rand|normal_|uniform_|multinomial|exponential_|geometric_|cauchy_|log_normal_",
    re.I,
)
_ATOMIC_OPS = re.compile(
    r"index_add|scatter_add|scatter_reduce|index_put|embedding_dense_backward|_embedding_bag|put_|histc|bincount|cumsum",
    re.I,
)


def explains(category: str, event: dict) -> bool:
    """Whether a trace origin event is the kind of site a hypothesis category predicts."""
    name = f"{event.get('name', '')} {event.get('scope', '')}"
    kind = event.get("kind", "")
    if category == "rng-state":
        return bool(_RANDOM_OPS.search(name)) or bool(event.get("meta", {}).get("rng_differs"))
    if category == "nondeterminism":
        return bool(_ATOMIC_OPS.search(name))
    if category in ("casts", "accumulation"):
        return kind in ("optimizer", "collective") or bool(
            re.search(r"to_copy|copy_|add|sum|_to|div", name)
        )
    if category == "collectives":
        return kind == "collective"
    if category == "optimizer-init":
        return kind == "optimizer"
    return False
