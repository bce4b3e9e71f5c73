"""The job's settings: one JSON file, with command-line overrides merged on top.

    python train.py --config config.json --set optimizer.lr=0.1 --set model.width=64

An override names a key by its dotted path in the file and gives its value as text; the
text is converted to the type of the value the file holds there (a list takes comma-separated
items of its first item's type). A key the file does not have is refused, so a typo cannot
add a setting nobody reads.
"""

from __future__ import annotations

import json
from typing import Any


def coerce(text: str, like: Any) -> Any:
    """An override's text as a value of the type of ``like``, the value it replaces."""
    if like is None or isinstance(like, str):
        return text
    if isinstance(like, list):
        return [coerce(part.strip(), like[0]) for part in text.split(",")]
    return type(like)(text)


def apply_override(cfg: dict, item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep:
        raise ValueError(f"override {item!r} is not KEY=VALUE")
    *parents, leaf = key.strip().split(".")
    node = cfg
    for name in parents:
        node = node[name]
    if leaf not in node:
        raise KeyError(f"unknown config key {key!r}")
    node[leaf] = coerce(text.strip(), node[leaf])


def load_config(path: str, overrides: list[str] | None = None) -> dict:
    with open(path) as fh:
        cfg = json.load(fh)
    for item in overrides or []:
        apply_override(cfg, item)
    return cfg
