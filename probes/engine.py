"""Parse each file once, run every probe's query in one pass, apply the predicates.

All probes of one language are concatenated into a single tree-sitter query, so a file's
tree is walked once per language regardless of the number of probes; the match's pattern
index maps back to its probe. File-level facts the predicates need (functions, the
file's own call graph, :class:`.unit.Unit`) are computed lazily, only for files where some
query matched. Predicates see one file at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import tree_sitter as ts

from .model import Hit, Match, Probe
from .unit import LANGUAGES, Func, Lang, Unit


@dataclass
class RawHit:
    probe: Probe
    hit: Hit
    func: Func | None


class Engine:
    """Compiled probes: one combined query per language."""

    def __init__(self, probes: Sequence[Probe]) -> None:
        self.probes = list(probes)
        self._queries: dict[Lang, ts.Query] = {}
        self._owners: dict[Lang, list[Probe]] = {}
        self._parsers = {lang: ts.Parser(language) for lang, language in LANGUAGES.items()}
        for lang in LANGUAGES:
            mine = [p for p in self.probes if p.lang == lang]
            if not mine:
                continue
            owners: list[Probe] = []
            for p in mine:
                owners.extend([p] * ts.Query(LANGUAGES[lang], p.query).pattern_count)
            self._queries[lang] = ts.Query(LANGUAGES[lang], "\n".join(p.query for p in mine))
            self._owners[lang] = owners

    def parse(self, path: str, lang: Lang, src: bytes) -> Unit:
        return Unit(path, lang, src, self._parsers[lang])

    def run(self, unit: Unit) -> list[RawHit]:
        q = self._queries.get(unit.lang)
        if q is None:
            return []
        owners = self._owners[unit.lang]
        out: list[RawHit] = []
        seen: set[tuple[str, int, int]] = set()
        for idx, caps in ts.QueryCursor(q).matches(unit.root):
            anchors = caps.get("anchor")
            if not anchors:
                continue
            probe = owners[idx]
            m = Match(unit=unit, anchor=anchors[0], caps=caps)
            hit = probe.predicate(m) if probe.predicate else default_hit(m)
            if hit is None:
                continue
            key = (probe.id, hit.line_start, hit.line_end)
            if key in seen:
                continue
            seen.add(key)
            out.append(RawHit(probe, hit, unit.enclosing_function(m.anchor)))
        return out


def default_hit(m: Match) -> Hit:
    return Hit(Unit.line(m.anchor), Unit.end_line(m.anchor))
