"""Pair the parameters of two sides by identity: the bytes they start from, their shape,
and their name after normalisation.

Init bytes and shape are the evidence; a name only settles a tie between tensors that start
from the same bytes (every LayerNorm weight starts at ones). A tensor that finds no partner
is listed with the reason, never dropped.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..errors import InputError
from ..manifest import TensorEntry, tensor_entry
from .capture import normalise
from .model import Mapping, Pair, SideMeta, Unmapped

NORMALISATION = ["strip leading 'module.' (the DDP, Float16Module and engine wrappers)"]


def load_side(path: Path) -> SideMeta:
    p = Path(path) / "side.json"
    try:
        return SideMeta.model_validate_json(p.read_text())
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"{p} is not a boundary capture: {str(exc).splitlines()[0]}") from None


def load_tensors(path: Path) -> dict:
    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError) as exc:
        raise InputError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} holds a {type(data).__name__}, not a dict of tensors")
    return data


def _key(e: TensorEntry) -> tuple:
    return (tuple(e.shape), e.dtype, e.sha256)


def build_mapping(a_dir: Path, b_dir: Path) -> Mapping:
    ma, mb = load_side(a_dir), load_side(b_dir)
    ia, ib = load_tensors(Path(a_dir) / "init.pt"), load_tensors(Path(b_dir) / "init.pt")
    sites_a = {s.name: s for s in ma.sites}
    sites_b = {s.name: s for s in mb.sites}
    ea = {n: tensor_entry(t) for n, t in ia.items() if n in sites_a}
    eb = {n: tensor_entry(t) for n, t in ib.items() if n in sites_b}
    by_key: dict[tuple, list[str]] = defaultdict(list)
    for n in sorted(eb):
        by_key[_key(eb[n])].append(n)
    pairs: list[Pair] = []
    unmapped: list[Unmapped] = []
    taken: set[str] = set()
    for n in sorted(ea):
        cands = [c for c in by_key.get(_key(ea[n]), []) if c not in taken]
        same_name = [c for c in cands if normalise(c) == normalise(n)]
        if len(same_name) == 1:
            pick, why = same_name[0], "normalised names equal"
        elif len(cands) == 1 and not same_name:
            pick, why = (
                cands[0],
                f"the only tensor with these init bytes (names differ: {normalise(n)!r} vs {normalise(cands[0])!r})",
            )
        else:
            reason = (
                "no tensor of B starts from these bytes with this shape and dtype"
                if not cands
                else f"{len(cands)} tensors of B start from these bytes and no name settles it"
            )
            unmapped.append(Unmapped(side="a", name=n, shape=ea[n].shape, reason=reason))
            continue
        taken.add(pick)
        pairs.append(
            Pair(
                a=n,
                b=pick,
                shape=ea[n].shape,
                evidence=[
                    f"init sha256 {ea[n].sha256[:16]} equal ({ea[n].dtype}, {ea[n].bytes} bytes)",
                    "shape equal",
                    why,
                ],
                a_site=sites_a[n],
                b_site=sites_b[pick],
            )
        )
    for n in sorted(set(eb) - taken):
        unmapped.append(
            Unmapped(side="b", name=n, shape=eb[n].shape, reason="no tensor of A paired with it")
        )
    for side, sites, have in (("a", sites_a, ea), ("b", sites_b, eb)):
        for n in sorted(set(sites) - set(have)):
            unmapped.append(
                Unmapped(side=side, name=n, shape=sites[n].shape, reason="no init bytes captured")
            )
    return Mapping(
        a_framework=ma.framework,
        b_framework=mb.framework,
        normalisation=NORMALISATION,
        pairs=pairs,
        unmapped=unmapped,
        outputs=[o for o in ma.outputs if o in mb.outputs],
    )
