"""Helpers shared by the importers: building events with recounted calls, signatures."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from ..model import Ev

# What reading a corrupted gzip member raises (a bad header, a cut stream, bad deflate data).
GZIP_ERRORS = (OSError, EOFError, zlib.error)
# What json.loads raises on bad input: a syntax error, bytes that are not UTF-8, an integer
# past Python's digit limit (all ValueError), and nesting deeper than the interpreter's stack.
JSON_ERRORS = (ValueError, RecursionError)


def loads(raw: bytes | str) -> Any:
    """``json.loads`` that refuses text which is not valid Unicode.

    ``json.loads(bytes)`` lets UTF-8-encoded surrogates through, and an escaped lone
    surrogate (``\\ud800``) is valid JSON; either would fail much later, when a name
    holding it is printed. Raises ValueError (one of JSON_ERRORS)."""
    text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw  # a BOM is allowed
    obj = json.loads(text)
    if "\\ud" in text or "\\uD" in text:  # rare: only then can a lone surrogate hide
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                "a lone surrogate escape (\\ud800-\\udfff): not Unicode text"
            ) from None
    return obj


def sig_of(value: Any) -> str | None:
    """A canonical string for a foreign tensor signature (dict, number, string or list)."""
    if value is None:
        return None
    if isinstance(value, dict):
        if "digest" in value or "hash" in value:
            d = value.get("digest", value.get("hash"))
            shape = value.get("shape")
            shape_s = "x".join(str(s) for s in shape) if isinstance(shape, list) else "?"
            return f"{value.get('dtype', '?')}[{shape_s}]:{d}"
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, float):
        return value.hex()  # exact bits of a float-valued hash (DebugMode's norm hash)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sigs(values: Any) -> tuple[str | None, ...]:
    if values is None:
        return ()
    if isinstance(values, list | tuple):
        return tuple(sig_of(v) for v in values)
    return (sig_of(values),)


def make_events(rows: list[dict[str, Any]], count_calls: bool = True) -> list[Ev]:
    """Rows (already in execution order) -> events; ``call`` counted per (step, scope, name)
    unless the row carries its own."""
    out: list[Ev] = []
    counts: dict[tuple[int, str, str], int] = {}
    for k, r in enumerate(rows):
        key = (r["step"], r.get("scope", ""), r["name"])
        c = counts.get(key, 0)
        counts[key] = c + 1
        call = c if count_calls or r.get("call") is None else r["call"]
        out.append(
            Ev(
                index=k,
                seq=r.get("seq", k),
                step=r["step"],
                kind=r.get("kind", "op"),
                name=r["name"],
                scope=r.get("scope", ""),
                call=call,
                phase=r.get("phase", "other"),
                caller=r.get("caller"),
                inputs=r.get("inputs", ()),
                outputs=r.get("outputs", ()),
                dump=r.get("dump"),
                meta=r.get("meta", {}),
                line=r["line"],
            )
        )
    return out


def files_in(path: Path, pattern) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if pattern.match(p.name))
    return [path]
