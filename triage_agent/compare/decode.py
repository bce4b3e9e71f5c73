"""Decoding one native event line into an ``Ev``, validated exactly as ``TraceEvent`` is.

Why a module of its own: the readers (line by line and the bytes-level scan) and the
file-backed stream all decode events, and each imports this; it imports only the record
shapes (``model``), so the comparator's modules form no import circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..trace_format import TraceEvent
from .errors import MalformedTraceError
from .model import Ev, digest_sig, ev_from_model, parse_json_line, validation_message, value_sigs

EVENT_PREFIXES = (b'{"type": "event", ', b'{"type":"event",')
_EVENT_KEYS = frozenset(TraceEvent.model_fields)
_DIGEST_KEYS = frozenset({"shape", "dtype", "numel", "digest", "order", "value", "value_order"})
# tuples, not sets: a garbled line may hold a list or an object here, which cannot be hashed
_KINDS = ("op", "module", "collective", "optimizer", "metric")
_PHASES = ("forward", "backward", "optimizer", "other")


def fast_digest(d: Any) -> bool:
    if d is None:
        return True
    if type(d) is not dict or not d.keys() <= _DIGEST_KEYS:
        return False
    shape = d.get("shape")
    order = d.get("order")
    return (
        type(shape) is list
        and all(type(s) is int for s in shape)
        and type(d.get("dtype")) is str
        and type(d.get("numel")) is int
        and type(d.get("digest")) is str
        and (order is None or type(order) is str)
        and type(d.get("value", "")) is str
        and type(d.get("value_order", "")) is str
    )


def fast_event(o: Any) -> bool:
    """True only for records the pydantic model accepts unchanged (tested against it)."""
    if type(o) is not dict or not o.keys() <= _EVENT_KEYS or o.get("type", "event") != "event":
        return False
    ins, outs = o.get("inputs", []), o.get("outputs", [])
    caller, dump = o.get("caller"), o.get("dump")
    return (
        type(o.get("seq")) is int
        and type(o.get("step")) is int
        and o.get("kind") in _KINDS
        and type(o.get("name")) is str
        and type(o.get("scope", "")) is str
        and type(o.get("call", 0)) is int
        and o.get("phase", "other") in _PHASES
        and (caller is None or type(caller) is str)
        and (dump is None or type(dump) is str)
        and type(o.get("meta", {})) is dict
        and type(ins) is list
        and type(outs) is list
        and all(fast_digest(d) for d in ins)
        and all(fast_digest(d) for d in outs)
    )


def decode_event_obj(o: Any, index: int, line: int, source: Path) -> Ev:
    """Decode one parsed event record, validating it exactly as ``TraceEvent`` would."""
    if fast_event(o):
        meta = o.get("meta", {})
        after = meta.get("inputs_after")
        return Ev(
            index=index,
            seq=o["seq"],
            step=o["step"],
            kind=o["kind"],
            name=o["name"],
            scope=o.get("scope", ""),
            call=o.get("call", 0),
            phase=o.get("phase", "other"),
            caller=o.get("caller"),
            inputs=tuple(digest_sig(d) for d in o.get("inputs", [])),
            outputs=tuple(digest_sig(d) for d in o.get("outputs", [])),
            dump=o.get("dump"),
            meta=meta,
            line=line,
            inputs_after=tuple(digest_sig(d) for d in after) if isinstance(after, list) else None,
            values=value_sigs(o.get("inputs", []), o.get("outputs", [])),
        )
    try:
        model = TraceEvent.model_validate(o)
    except ValidationError as exc:
        raise MalformedTraceError(
            f"{source}:{line}: invalid trace event at {validation_message(exc)}"
        ) from None
    return ev_from_model(model, index, line)


def decode_event_line(raw: bytes, index: int, line: int, source: Path) -> Ev:
    return decode_event_obj(parse_json_line(raw, source, line), index, line, source)
