"""rng_advance: does calling a function advance a process-global random generator?

Hypothesis: "this function (a validation subset, an augmentation, a metrics or logging
helper) draws from a global generator": when the training step draws from the same stream
(dropout masks, a shuffle, noise), every call of the function moves the step's later draws.
``supported: true``  calling the function changed the state of at least one global
                     generator (each one is reported, advanced yes or no);
``supported: false`` every generator's state is byte for byte what it was before the calls;
``supported: null``  a state moved between two reads with no call between them, so nothing
                     can be measured here.
Measured: torch's default CPU generator, each CUDA device's default generator (when CUDA is
available), numpy's global RandomState and python's ``random`` module, each as the sha256
of its state's bytes. The function's module is imported first, then every generator is
seeded with ``seed`` (an import that draws is not counted), its state read twice, the
function called ``calls`` times with ``args`` and ``kwargs``, and the state read again. A
reseeding counts as an advance: the stream after it is not the stream before it.
Limits: arguments are JSON values (no tensors, no objects of the case); ``Class.method``
resolves to the function on the class, so a method needs its instance passed explicitly;
draws in processes or threads the function leaves running are not waited for; generators of
its own (``torch.Generator``, ``np.random.default_rng``, ``random.Random``) are not global
and not measured; the program runs in its launch directory, not the job's.
"""

import copy
import hashlib
import importlib
import random
import sys

from _common import emit, load_params, run_guarded

TEMPLATE = "rng_advance"
PARAMS: dict = {}


def resolve(spec):
    module, _, qualname = spec.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is a {type(obj).__name__}, not a callable")
    return obj


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else repr(p).encode())
    return h.hexdigest()


def seed_all(seed, absent):
    random.seed(seed)
    if "numpy" not in absent:
        import numpy

        numpy.random.seed(seed)
    if "torch_cpu" not in absent:
        import torch

        torch.manual_seed(seed)  # seeds every CUDA device too


def read_states(absent):
    """sha256 of each global generator's state; reading a state draws nothing."""
    out = {}
    if "torch_cpu" not in absent:
        import torch

        out["torch_cpu"] = _digest(torch.get_rng_state().numpy().tobytes())
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                out[f"torch_cuda:{i}"] = _digest(torch.cuda.get_rng_state(i).numpy().tobytes())
    if "numpy" not in absent:
        import numpy

        kind, keys, pos, has_gauss, cached = numpy.random.get_state()
        out["numpy"] = _digest(kind, keys.tobytes(), pos, has_gauss, cached)
    out["python"] = _digest(random.getstate())
    return out


def _absent():
    out = {}
    try:
        import torch

        if not torch.cuda.is_available():
            out["torch_cuda"] = "CUDA is not available here"
    except ImportError:
        out["torch_cpu"] = out["torch_cuda"] = "torch is not installed"
    try:
        import numpy  # noqa: F401
    except ImportError:
        out["numpy"] = "numpy is not installed"
    return out


def main(params):
    function = params["function"]
    for p in reversed(params.get("paths") or []):
        sys.path.insert(0, p)
    fn = resolve(function)  # an unknown function is the reproducer's error, not an observation
    absent = _absent()
    seed_all(int(params.get("seed", 0)), absent)
    before = read_states(absent)
    control = read_states(absent)
    args, kwargs, calls = params.get("args") or [], params.get("kwargs") or {}, params["calls"]
    failure, returned = None, None
    for _ in range(calls):
        try:
            # fresh copies each call: a function that changes its arguments in place must
            # not change the next call's, nor the parameters reported
            returned = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
        except Exception as exc:  # noqa: BLE001 - reported below, with what it drew
            failure = f"{type(exc).__name__}: {exc}"[:2000]
            break
    after = read_states(absent)
    generators = {
        name: {
            "advanced": "yes" if after[name] != before[name] else "no",
            "before": before[name][:16],
            "after": after[name][:16],
        }
        for name in before
    }
    moved = [n for n, g in generators.items() if g["advanced"] == "yes"]
    still = [n for n, g in generators.items() if g["advanced"] == "no"]
    details = {
        "function": function,
        "calls": calls,
        "generators": generators,
        "advanced": moved,
        "not_measured": absent,
        "returned": type(returned).__name__,
    }
    digests = {"before": before, "after": after}
    notes = [f"advanced: {', '.join(moved) or 'none'}; not advanced: {', '.join(still) or 'none'}"]
    notes += [f"{name} not measured: {why}" for name, why in absent.items()]
    compared = f"each global generator's state before and after {calls} call(s) of {function}"
    if failure is not None:
        details["exception"] = f"the call raised {failure}"
        emit(TEMPLATE, "error", None, compared, digests, details, notes, params)
        sys.exit(1)
    if control != before:
        moving = [n for n in before if control[n] != before[n]]
        emit(
            TEMPLATE,
            "ok",
            None,
            compared,
            digests,
            details,
            [f"{', '.join(moving)} moved with no call between two reads: nothing measured"],
            params,
        )
        return
    emit(TEMPLATE, "ok", bool(moved), compared, digests, details, notes, params)


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)
