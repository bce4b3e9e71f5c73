"""Reading foreign JSONL files record by record, with the torn-last-line rule of the reader."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import MalformedTraceError
from ._util import GZIP_ERRORS, JSON_ERRORS, loads


def records(path: Path, warnings: list[str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed record) for each non-empty line; a torn last line is dropped
    with a warning, a broken line elsewhere is malformed input (file:line)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            lines = fh.read().split(b"\n")
    except GZIP_ERRORS as exc:
        raise MalformedTraceError(f"{path}: cannot read ({exc})") from None
    last_torn = lines[-1] != b""
    if not last_torn:
        lines.pop()
    for k, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield k, loads(raw)
        except JSON_ERRORS as exc:
            if last_torn and k == len(lines):
                warnings.append(
                    f"{path}:{k}: torn last line (the writer stopped mid-line); "
                    "compared up to the line before it"
                )
                return
            raise MalformedTraceError(f"{path}:{k}: not valid JSON ({exc})") from None
