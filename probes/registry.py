"""All probes: every module in ``probes/rules`` defines one ``PROBE``.

Modules are discovered, not listed, so a new probe is one new file plus its fixture in
``probes/fixtures/<probe-id>.<ext>``.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from . import rules
from .model import TEMPLATES, Probe


@lru_cache(maxsize=1)
def _load() -> tuple[Probe, ...]:
    found: list[Probe] = []
    for info in sorted(pkgutil.iter_modules(rules.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{rules.__name__}.{info.name}")
        probe = getattr(mod, "PROBE", None)
        if not isinstance(probe, Probe):
            raise RuntimeError(f"probes/rules/{info.name}.py defines no PROBE")
        if probe.template is not None and probe.template not in TEMPLATES:
            raise RuntimeError(f"probe {probe.id}: unknown reproducer template {probe.template!r}")
        found.append(probe)
    ids = [p.id for p in found]
    if len(ids) != len(set(ids)):
        raise RuntimeError(f"duplicate probe ids: {sorted(i for i in ids if ids.count(i) > 1)}")
    return tuple(found)


def all_probes() -> list[Probe]:
    """Every probe, sorted by module name (so by category prefix, then name)."""
    return list(_load())


def get_probe(probe_id: str) -> Probe:
    for p in _load():
        if p.id == probe_id:
            return p
    raise KeyError(probe_id)
