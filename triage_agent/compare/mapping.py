"""Correspondence maps: regex rules rewriting run A's scope and name strings into run B's.

Why: DeepSpeed and Megatron-LM name the same module differently
(``module.layers.3.mlp.dense_h_to_4h`` vs ``decoder.layers.3.mlp.linear_fc1``). Alignment
is on names, so a cross-framework comparison needs the correspondence written down; it is
part of the case, reviewable, never guessed. Rules apply in file order, each a ``re.sub``
over the chosen field, before alignment. A TOML file::

    [[rule]]
    field = "scope"                 # scope | name | both
    pattern = '^module\\.'
    replace = ''

JSON with the same structure (``{"rule": [...]}``) is accepted too.

Limits: rewriting is one-way (A into B's vocabulary); rules are plain Python regexes.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import InputError
from .model import Ev, MemoryRankStream, RankStream


class MapRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: Literal["scope", "name", "both"] = "scope"
    pattern: str
    replace: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _replacement_fits(self) -> MapRule:
        # a bad group reference (\\9 with one group) would fail only on the first match: now
        try:
            re.compile(self.pattern).sub(self.replace, "")
        except (re.error, IndexError) as exc:
            raise ValueError(f"replace is not a valid replacement: {exc}") from None
        return self


class Mapping(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rule: list[MapRule] = Field(default_factory=list)
    source: str = ""

    def compiled(self) -> list[tuple[str, re.Pattern[str], str]]:
        return [(r.field, re.compile(r.pattern), r.replace) for r in self.rule]


def load_mapping(path: str | Path) -> Mapping:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"cannot read mapping file {p}: {exc.strerror}") from None
    try:
        raw = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if p.suffix == ".json" else "TOML"
        raise InputError(f"{p}: not valid {kind}: {exc}") from None
    try:
        m = Mapping.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise InputError(f"{p}: invalid mapping rule at '{loc}': {first['msg']}") from None
    return m.model_copy(update={"source": str(p)})


def apply_mapping(stream: RankStream, mapping: Mapping) -> RankStream:
    """Decode every event of ``stream`` and rewrite its scope/name with the rules."""
    rules = mapping.compiled()
    cache: dict[tuple[str, str], tuple[str, str]] = {}

    def rewrite(scope: str, name: str) -> tuple[str, str]:
        key = (scope, name)
        hit = cache.get(key)
        if hit is None:
            for fld, pat, rep in rules:
                if fld in ("scope", "both"):
                    scope = pat.sub(rep, scope)
                if fld in ("name", "both"):
                    name = pat.sub(rep, name)
            hit = cache[key] = (scope, name)
        return hit

    events: list[Ev] = []
    for e in stream.events(0, len(stream)):
        scope, name = rewrite(e.scope, e.name)
        events.append(e._replace(scope=scope, name=name))
    # Call counts are per (step, scope, name); two A scopes mapped onto one B scope would
    # otherwise collide, so recount in A's execution order.
    counts: dict[tuple[int, str, str], int] = {}
    for k, e in enumerate(events):
        key = (e.step, e.scope, e.name)
        c = counts.get(key, 0)
        counts[key] = c + 1
        if c != e.call:
            events[k] = e._replace(call=c)
    return MemoryRankStream(
        stream.rank, stream.source, events, stream.header, stream.truncated_at, stream.clean_end
    )


def decoded(stream: RankStream) -> RankStream:
    """The stream with every event decoded (so its hashes are of decoded bodies)."""
    if isinstance(stream, MemoryRankStream):
        return stream
    return MemoryRankStream(
        stream.rank,
        stream.source,
        stream.events(0, len(stream)),
        stream.header,
        stream.truncated_at,
        stream.clean_end,
    )
