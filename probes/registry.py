"""All probes: every module in ``probes/rules`` defines one ``PROBE``.

Modules are discovered, not listed, so a new probe is one new file plus its fixture under the
module's own base name, as semgrep pairs a rule with its test: ``rules/<module>.py`` is tested
by ``fixtures/<module>.<ext>`` (and ``fixtures/<module>.d/`` for cases that need a file of
their own).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path

from . import rules
from .model import TEMPLATES, Probe

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def rule_modules() -> list[str]:
    """Base names of the rule modules (helpers starting with ``_`` are not rules), sorted."""
    names = (i.name for i in pkgutil.iter_modules(rules.__path__))
    return sorted(n for n in names if not n.startswith("_"))


@lru_cache(maxsize=1)
def _load() -> dict[str, Probe]:
    found: dict[str, Probe] = {}
    for name in rule_modules():
        mod = importlib.import_module(f"{rules.__name__}.{name}")
        probe = getattr(mod, "PROBE", None)
        if not isinstance(probe, Probe):
            raise RuntimeError(f"probes/rules/{name}.py defines no PROBE")
        if probe.template is not None and probe.template not in TEMPLATES:
            raise RuntimeError(f"probe {probe.id}: unknown reproducer template {probe.template!r}")
        found[name] = probe
    ids = [p.id for p in found.values()]
    if len(ids) != len(set(ids)):
        raise RuntimeError(f"duplicate probe ids: {sorted(i for i in ids if ids.count(i) > 1)}")
    return found


def all_probes() -> list[Probe]:
    """Every probe, sorted by module name (so by category prefix, then name)."""
    return list(_load().values())


def get_probe(probe_id: str) -> Probe:
    for p in _load().values():
        if p.id == probe_id:
            return p
    raise KeyError(probe_id)


def probe_module(probe_id: str) -> str:
    """The base name of the module in ``probes/rules`` that defines ``probe_id``."""
    for name, p in _load().items():
        if p.id == probe_id:
            return name
    raise KeyError(probe_id)


def fixture_files(module: str, root: Path = FIXTURES) -> list[Path]:
    """The fixtures of rule module ``module``: ``<module>.<ext>`` files, then ``<module>.d/*``."""
    files = sorted(p for p in root.glob(f"{module}.*") if p.is_file())
    extra = root / f"{module}.d"
    if extra.is_dir():
        files += sorted(p for p in extra.iterdir() if p.is_file())
    return files
