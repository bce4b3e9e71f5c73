"""The Markdown tables the benchmarks print (and RESULTS.md holds): a header, its rule, a row a line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """``columns`` as the header and each row's cells as given (``str()`` of each: numbers
    are formatted by the caller, so a table says exactly what its benchmark chose to)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
