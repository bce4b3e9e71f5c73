"""Shared logic of the probes for random draws outside the training step: which calls draw
from (or reseed) a process-global generator, which of them belong to the training step, and
which run in a helper beside it.

Why it matters: torch's, numpy's and python's global generators are each one stream. When
the step draws from a stream (dropout masks, a shuffle, noise) and a helper outside the step
(a validation subset, an augmentation, a metrics sample, a logging pick) draws from the same
stream, anything that changes how often the helper runs (a flag, an evaluation interval, a
resume) moves every later draw of the step: the runs stop agreeing with no change to the
model.

What a file tells, and so what the probes see:

- a *draw* is a call of the stream's sampling or seeding functions (``torch.randperm``,
  ``F.dropout``, ``t.normal_()``, ``random_split``, ``np.random.choice``, ``random.shuffle``,
  ``torch.manual_seed`` ...), spelled through the module or a name imported from it; a call
  given ``generator=`` draws from its own generator, and calls on a generator object
  (``rng.choice``, ``random.Random(0).shuffle``) are not global draws;
- the *step* is every function named like one (``forward``, ``backward``, ``training_step``,
  ``train_step``, ``step``, ``compute_loss`` ...), the body of a loop that calls
  ``backward``, the functions the loss comes from inside that loop, and what each reaches
  through calls of this file; a dropout module built anywhere in the file draws from torch's
  stream in the step;
- *setup* is the code of initialisers, seeding utilities, module level, and the function
  that holds the training loop outside the loop: it runs once, in both runs alike;
- a draw inside ``with torch.random.fork_rng()``, or in a function that puts the stream's
  state back (``set_rng_state``, ``np.random.set_state``, ``random.setstate``), leaves the
  stream as it found it.

Cannot see: a step in another file (a helper in a file that holds no step is reported with
lower confidence, saying so), draws made through an alias the file's imports do not show,
``torch.distributions`` samples, a sampler or ``DataLoader`` iterated without a generator
(its base seed is a global draw), the device a tensor draw runs on (CPU and CUDA streams
are named together as torch's), and whether the helper runs in one run only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import tree_sitter as ts

from ..facts import init_reach, is_init_name
from ..model import Category, Hit, Match, Probe
from ..unit import LANGUAGES, Func, Unit

Stream = Literal["torch", "numpy", "python"]

STREAM_NAMES: dict[Stream, str] = {
    "torch": "torch's global generator",
    "numpy": "numpy's global generator (np.random)",
    "python": "python's global generator (random)",
}

TORCH_DRAWS = frozenset(
    {
        "rand",
        "randn",
        "randint",
        "randperm",
        "rand_like",
        "randn_like",
        "randint_like",
        "bernoulli",
        "multinomial",
        "normal",
        "poisson",
        "random_split",
    }
)
DROPOUTS = frozenset(
    {
        "dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
        "feature_dropout",
    }
)
TORCH_SEEDS = frozenset({"manual_seed", "manual_seed_all", "seed", "seed_all"})
# in-place samplers of a tensor (and torch.nn.init's of the same names): they draw from the
# default generator of the tensor's device unless given one
TENSOR_SAMPLERS = frozenset(
    {
        "bernoulli_",
        "normal_",
        "uniform_",
        "random_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
    }
)
# numpy.random's functions on the global RandomState (its generator constructors,
# default_rng, RandomState, SeedSequence, are not draws: they make generators of their own)
NUMPY_DRAWS = frozenset(
    [
        "beta",
        "binomial",
        "bytes",
        "chisquare",
        "choice",
        "dirichlet",
        "exponential",
        "f",
        "gamma",
        "geometric",
        "gumbel",
        "hypergeometric",
        "laplace",
        "logistic",
        "lognormal",
        "logseries",
        "multinomial",
        "multivariate_normal",
        "negative_binomial",
        "noncentral_chisquare",
        "noncentral_f",
        "normal",
        "pareto",
        "permutation",
        "poisson",
        "power",
        "rand",
        "randint",
        "randn",
        "random",
        "random_integers",
        "random_sample",
        "ranf",
        "rayleigh",
        "sample",
        "seed",
        "shuffle",
        "standard_cauchy",
        "standard_exponential",
        "standard_gamma",
        "standard_normal",
        "standard_t",
        "triangular",
        "uniform",
        "vonmises",
        "wald",
        "weibull",
        "zipf",
    ]
)
PYTHON_DRAWS = frozenset(
    {
        "random",
        "randint",
        "randrange",
        "choice",
        "choices",
        "sample",
        "shuffle",
        "uniform",
        "gauss",
        "normalvariate",
        "lognormvariate",
        "expovariate",
        "vonmisesvariate",
        "gammavariate",
        "betavariate",
        "paretovariate",
        "weibullvariate",
        "triangular",
        "binomialvariate",
        "getrandbits",
        "randbytes",
        "seed",
    }
)
DROPOUT_MODULES = re.compile(r"^(Feature)?(Alpha)?Dropout([123]d)?$")
RESTORES: dict[Stream, re.Pattern[str]] = {
    "torch": re.compile(r"(?<![\w])_?set_(cuda_)?rng_state(_all)?\s*\("),
    "numpy": re.compile(r"\brandom\.set_state\s*\("),
    "python": re.compile(r"\brandom\.setstate\s*\("),
}
STEP_NAME = re.compile(
    r"^_?(forward\w*|backward\w*|\w*_forward|\w*_backward|step|\w*train\w*_step\w*|"
    r"train_(on_)?batch|compute_loss\w*|loss_fn|closure)$"
)
# names whose job is to seed or build: their draws are setup, run once in both runs alike
SETUP_NAME = re.compile(r"(?i)^(main|_?\w*seed\w*|_?\w*init\w*|reset_parameters|_?build\w*)$")
_TORCH_RECV = ("torch", "torch.random", "torch.cuda", "torch.utils.data", "data")
_DROPOUT_RECV = ("F", "functional", "nn.functional", "torch.nn.functional", "torch")
_NUMPY_RECV = ("np.random", "numpy.random")
_FROM_MODULES: dict[str, Stream] = {
    "torch": "torch",
    "torch.nn.functional": "torch",
    "torch.utils.data": "torch",
    "numpy.random": "numpy",
    "random": "python",
}
_CALLS = ts.Query(
    LANGUAGES["python"],
    "(call function: [(attribute attribute: (identifier) @m) (identifier) @m]) @call",
)


@dataclass
class Draw:
    """One call that draws from (or reseeds) a global stream."""

    stream: Stream
    node: ts.Node
    line: int
    text: str
    reseeds: bool
    func: Func | None
    where: str = ""  # step | setup | restored | helper
    dropout: bool = False


@dataclass
class FileDraws:
    draws: list[Draw] = field(default_factory=list)
    dropout_modules: list[tuple[int, str]] = field(default_factory=list)
    has_step: bool = False


def _imports(unit: Unit) -> tuple[dict[str, Stream], set[str], set[str]]:
    """Names imported from a drawing module (name -> stream), the file's aliases of
    numpy.random, and the names that stand for python's random module."""
    names: dict[str, Stream] = {}
    numpy_aliases = set(_NUMPY_RECV)
    python_random = {"random"}
    for node in unit.root.children:
        if node.type == "import_from_statement":
            mod = node.child_by_field_name("module_name")
            stream = _FROM_MODULES.get(unit.text(mod)) if mod is not None else None
            for item in node.children_by_field_name("name"):
                name, alias = item, item
                if item.type == "aliased_import":
                    name = item.child_by_field_name("name")
                    alias = item.child_by_field_name("alias")
                if name is None or alias is None:
                    continue
                if mod is not None and unit.text(mod) == "numpy" and unit.text(name) == "random":
                    numpy_aliases.add(unit.text(alias))
                    python_random.discard(unit.text(alias))
                elif stream is not None:
                    names[unit.text(alias)] = stream
        elif node.type == "import_statement":
            for item in node.children:
                if item.type == "dotted_name" and unit.text(item) == "random":
                    python_random.add("random")
                elif item.type == "aliased_import":
                    name = unit.text(item.child_by_field_name("name"))
                    alias = unit.text(item.child_by_field_name("alias"))
                    if name == "numpy.random":
                        numpy_aliases.add(alias)
                    elif name == "random":
                        python_random.add(alias)
    return names, numpy_aliases, python_random


def _keyword(args: ts.Node | None, unit: Unit, name: str) -> str | None:
    for a in args.named_children if args is not None else ():
        if a.type == "keyword_argument":
            k = a.child_by_field_name("name")
            v = a.child_by_field_name("value")
            if k is not None and v is not None and unit.text(k) == name:
                return unit.text(v)
    return None


def _classify(
    unit: Unit, call: ts.Node, imports: tuple[dict[str, Stream], set[str], set[str]]
) -> tuple[Stream, bool] | None:
    """(stream, reseeds) of a call that draws from a global stream, else None."""
    names, numpy_aliases, python_random = imports
    fn = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if fn is None or _keyword(args, unit, "generator") not in (None, "None"):
        return None
    if fn.type == "identifier":
        name, recv = unit.text(fn), None
        stream = names.get(name)
    else:
        attr = fn.child_by_field_name("attribute")
        obj = fn.child_by_field_name("object")
        if attr is None or obj is None:
            return None
        name, recv = unit.text(attr), unit.text(obj)
        stream = None
    if name in DROPOUTS:
        off = _keyword(args, unit, "training") == "False" or _keyword(args, unit, "p") in (
            "0",
            "0.0",
        )
        if off or (recv is not None and recv not in _DROPOUT_RECV) or (recv is None and not stream):
            return None
        return "torch", False
    if recv is None:
        if stream is None:
            return None
        if stream == "torch" and (name in TORCH_DRAWS or name in TORCH_SEEDS):
            return "torch", name in TORCH_SEEDS
        if stream == "numpy" and name in NUMPY_DRAWS:
            return "numpy", name == "seed"
        if stream == "python" and name in PYTHON_DRAWS:
            return "python", name == "seed"
        return None
    if recv in numpy_aliases:
        return ("numpy", name == "seed") if name in NUMPY_DRAWS else None
    if recv in python_random and name in PYTHON_DRAWS:
        return "python", name == "seed"
    if recv in _TORCH_RECV and (name in TORCH_DRAWS or name in TORCH_SEEDS):
        if recv == "data" and name != "random_split":
            return None
        return "torch", name in TORCH_SEEDS
    if name in TENSOR_SAMPLERS and recv not in numpy_aliases and recv not in python_random:
        return "torch", False
    return None


def _rate(unit: Unit, call: ts.Node) -> str | None:
    """A dropout module's rate as written (its ``p=`` or first argument)."""
    args = call.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    if first is not None and first.type != "keyword_argument":
        return unit.text(first)
    return _keyword(args, unit, "p")


def _training_loops(unit: Unit) -> list[ts.Node]:
    """Loops whose body calls ``backward``: the training loop written inline."""
    loops = []
    for _, caps in ts.QueryCursor(_CALLS).matches(unit.root):
        if unit.text(caps["m"][0]) != "backward":
            continue
        p = caps["call"][0].parent
        while p is not None and p.type not in ("function_definition", "module"):
            if p.type in ("for_statement", "while_statement"):
                loops.append(p)
            p = p.parent
    return loops


def _inside(node: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _loss_sources(unit: Unit, loop: ts.Node) -> set[str]:
    """Names of the functions whose result the loop's ``backward`` differentiates."""
    losses: set[str] = set()
    for _, caps in ts.QueryCursor(_CALLS).matches(loop):
        if unit.text(caps["m"][0]) != "backward":
            continue
        fn = caps["call"][0].child_by_field_name("function")
        obj = fn.child_by_field_name("object") if fn is not None else None
        if obj is not None and obj.type == "identifier":
            losses.add(unit.text(obj))
        args = caps["call"][0].child_by_field_name("arguments")
        for a in args.named_children if args is not None else ():
            if a.type == "identifier":
                losses.add(unit.text(a))
    out: set[str] = set()
    stack = [loop]
    while stack:
        n = stack.pop()
        if n.type == "assignment":
            left = n.child_by_field_name("left")
            right = n.child_by_field_name("right")
            targets = {unit.text(left)} if left is not None else set()
            if left is not None and left.type in ("pattern_list", "tuple_pattern"):
                targets = {unit.text(c) for c in left.named_children}
            if right is not None and targets & losses:
                for _, caps in ts.QueryCursor(_CALLS).matches(right):
                    out.add(unit.text(caps["m"][0]))
        stack.extend(n.named_children)
    return out


def _in_fork_rng(node: ts.Node, unit: Unit) -> bool:
    p = node.parent
    while p is not None and p.type not in ("function_definition", "module"):
        if p.type == "with_statement" and "fork_rng" in unit.text(p.named_children[0]):
            return True
        p = p.parent
    return False


def file_draws(unit: Unit) -> FileDraws:
    """Every global draw of the file, each placed in the step, setup or a helper."""
    cached = unit.cache.get("global_draws")
    if isinstance(cached, FileDraws):
        return cached
    out = FileDraws()
    unit.cache["global_draws"] = out
    if unit.lang != "python":
        return out
    imports = _imports(unit)
    loops = _training_loops(unit)
    step_names = {f.name for f in unit.functions if STEP_NAME.match(f.name)}
    for loop in loops:
        step_names |= _loss_sources(unit, loop)
    step: set[int] = set()
    for f in unit.functions:
        if f.name in step_names:
            step |= {id(g) for g in unit.reachable(f)}
    loop_funcs = {id(unit.enclosing_function(loop)) for loop in loops}
    setup = init_reach(unit)
    for _, caps in ts.QueryCursor(_CALLS).matches(unit.root):
        call, name = caps["call"][0], unit.text(caps["m"][0])
        if DROPOUT_MODULES.match(name):
            if _rate(unit, call) not in ("0", "0.0"):
                out.dropout_modules.append((Unit.line(call), _short(unit.text(call))))
            continue
        kind = _classify(unit, call, imports)
        if kind is None:
            continue
        f = unit.enclosing_function(call)
        d = Draw(
            kind[0], call, Unit.line(call), unit.text(call), kind[1], f, dropout=name in DROPOUTS
        )
        if f is None or id(f) in setup or SETUP_NAME.match(f.name) or is_init_name(f.name):
            d.where = "setup" if not any(_inside(call, lp) for lp in loops) else "step"
        elif id(f) in step or any(_inside(call, lp) for lp in loops):
            d.where = "step"
        elif id(f) in loop_funcs:
            d.where = "setup"
        elif (d.stream == "torch" and _in_fork_rng(call, unit)) or RESTORES[d.stream].search(
            unit.text(f.node)
        ):
            d.where = "restored"
        else:
            d.where = "helper"
        out.draws.append(d)
    out.has_step = bool(step or loops or out.dropout_modules)
    if not out.has_step:
        # with no step in sight, a functional dropout is a piece of some model's forward
        for d in out.draws:
            if d.dropout and d.where == "helper":
                d.where = "step"
                out.has_step = True
    return out


def check(m: Match, stream: Stream) -> Hit | None:
    """A draw of ``stream`` in a helper beside a step that draws from it (or a file that
    shows no step at all)."""
    facts = file_draws(m.unit)
    mine = next((d for d in facts.draws if d.node == m.anchor), None)
    if mine is None or mine.stream != stream or mine.where != "helper" or mine.func is None:
        return None
    verb = "reseeds" if mine.reseeds else "draws from"
    site = f"`{_short(mine.text)}` in `{mine.func.qualname}` {verb} {STREAM_NAMES[stream]}"
    steps = [
        (d.line, _short(d.text)) for d in facts.draws if d.stream == stream and d.where == "step"
    ]
    if stream == "torch":
        steps += [
            (line, f"{text} (its forward draws the masks)") for line, text in facts.dropout_modules
        ]
    measure = (
        f" Measure it with the rng_advance reproducer (function `<module>:{mine.func.qualname}` "
        "and its call arguments)."
    )
    if steps:
        line, text = min(steps)
        return Hit(
            mine.line,
            Unit.end_line(mine.node),
            note=f"{site}; the training step draws from it too, at line {line} ({text})." + measure,
        )
    if facts.has_step:
        return None  # the step this file shows draws nothing from this stream
    return Hit(
        mine.line,
        Unit.end_line(mine.node),
        note=f"{site}; this file holds no training step, so whether the step draws from the "
        f"same stream is not seen here (it does when {_SHARED_WHEN[stream]})." + measure,
        confidence=0.5,
    )


_SHARED_WHEN: dict[Stream, str] = {
    "torch": "its model has dropout or it draws noise, masks or a shuffle itself",
    "numpy": "its data pipeline shuffles, samples or adds noise with np.random",
    "python": "its data pipeline shuffles or samples with the random module",
}


def _short(text: str, limit: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def query(names: frozenset[str]) -> str:
    listed = " ".join(f'"{n}"' for n in sorted(names))
    return (
        "(call function: [(attribute attribute: (identifier) @m) (identifier) @m] "
        f"(#any-of? @m {listed})) @anchor"
    )


def probe(stream: Stream, names: frozenset[str], title: str, rationale: str) -> Probe:
    return Probe(
        id=f"rng-{stream}-draw-outside-step",
        category=Category.rng_state,
        severity="medium",
        title=title,
        rationale=rationale,
        template=None,
        query=query(names),
        predicate=lambda m: check(m, stream),
    )
