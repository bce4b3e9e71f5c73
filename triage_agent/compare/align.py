"""Event alignment of one rank of two runs, in execution order.

Three tiers, cheapest first, so that two near-identical million-event streams cost little:

1. Anchors on body hashes: the common prefix and suffix, then every body that occurs exactly
   once in each run (an event's body includes its key and digests, so equal bodies are the
   same event with the same data). Anchors that cross (a reordering) are reduced to the
   longest increasing run; the rest fall into gaps.
2. Gaps between anchors are decoded. If both sides carry the same run-independent keys
   (step, scope, name, call) they pair one to one (same ops, different data).
3. Otherwise a gap is aligned per (step, scope) by sequence alignment of op names, so an
   extra op, a missing collective or a recompute shows up as unmatched events with their
   positions and does not shift every later pairing. Nothing is skipped: every event of
   both runs ends up paired or reported as unmatched.

Limits: sequence alignment inside one (step, scope) group of more than ~4M name pairs falls
back to pairing on (name, call) keys.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, field

import numpy as np

from .model import Ev, RankStream

_SEQMATCH_LIMIT = 4_000_000


@dataclass
class Alignment:
    """Anchored runs (equal by hash), decoded pairs, and unmatched events of each side."""

    runs: list[tuple[int, int, int]] = field(default_factory=list)  # (i, j, length)
    pairs: list[tuple[Ev, Ev]] = field(default_factory=list)
    only_a: list[tuple[Ev, int]] = field(default_factory=list)  # (event, position in B)
    only_b: list[tuple[Ev, int]] = field(default_factory=list)  # (event, position in A)
    method: str = "exact"
    reordered: int = 0

    @property
    def matched(self) -> int:
        return sum(n for _, _, n in self.runs) + len(self.pairs)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    neq = np.flatnonzero(a[:n] != b[:n])
    return int(neq[0]) if len(neq) else n


def _lis(seq: list[int]) -> list[int]:
    """Indices into ``seq`` of one longest strictly increasing subsequence (O(n log n))."""
    tails: list[int] = []
    tails_idx: list[int] = []
    prev = [-1] * len(seq)
    for k, v in enumerate(seq):
        pos = bisect.bisect_left(tails, v)
        if pos == len(tails):
            tails.append(v)
            tails_idx.append(k)
        else:
            tails[pos] = v
            tails_idx[pos] = k
        prev[k] = tails_idx[pos - 1] if pos else -1
    out: list[int] = []
    k = tails_idx[-1] if tails_idx else -1
    while k >= 0:
        out.append(k)
        k = prev[k]
    return out[::-1]


def anchors(ha: list[int], hb: list[int]) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Anchor positions (ia, jb), increasing in both, and the unique matches that crossed
    them (equal events executed in a different order)."""
    a = np.asarray(ha, dtype=np.int64)
    b = np.asarray(hb, dtype=np.int64)
    n, m = len(a), len(b)
    p = _common_prefix(a, b)
    s = _common_prefix(a[p:][::-1], b[p:][::-1])
    s = min(s, n - p, m - p)
    mid_a, mid_b = a[p : n - s], b[p : m - s]
    ia = np.zeros(0, dtype=np.int64)
    jb = np.zeros(0, dtype=np.int64)
    crossed: list[tuple[int, int]] = []
    if len(mid_a) and len(mid_b):
        order_a = np.argsort(mid_a, kind="stable")
        order_b = np.argsort(mid_b, kind="stable")
        sa, sb = mid_a[order_a], mid_b[order_b]
        # a body that occurs twice in one run cannot anchor (valid traces have none)
        uniq_a = np.ones(len(sa), dtype=bool)
        dup = sa[1:] == sa[:-1]
        uniq_a[1:] &= ~dup
        uniq_a[:-1] &= ~dup
        uniq_b = np.ones(len(sb), dtype=bool)
        dup = sb[1:] == sb[:-1]
        uniq_b[1:] &= ~dup
        uniq_b[:-1] &= ~dup
        pos = np.searchsorted(sb, sa)
        posc = np.minimum(pos, len(sb) - 1)
        hit = (pos < len(sb)) & (sb[posc] == sa) & uniq_a & uniq_b[posc]
        ia = np.sort(order_a[hit])
        jb_of = np.empty(len(mid_a), dtype=np.int64)
        jb_of[order_a[hit]] = order_b[posc[hit]]
        jb = jb_of[ia]
        if len(jb) > 1 and not np.all(np.diff(jb) > 0):
            keep = np.asarray(_lis(jb.tolist()), dtype=np.int64)
            mask = np.ones(len(jb), dtype=bool)
            mask[keep] = False
            crossed = list(zip((ia[mask] + p).tolist(), (jb[mask] + p).tolist(), strict=True))
            ia, jb = ia[keep], jb[keep]
    pre = np.arange(p, dtype=np.int64)
    ia = np.concatenate([pre, ia + p, np.arange(n - s, n, dtype=np.int64)])
    jb = np.concatenate([pre, jb + p, np.arange(m - s, m, dtype=np.int64)])
    return ia, jb, crossed


def _runs(ia: np.ndarray, jb: np.ndarray) -> list[tuple[int, int, int]]:
    if not len(ia):
        return []
    breaks = np.flatnonzero((np.diff(ia) != 1) | (np.diff(jb) != 1)) + 1
    starts = np.concatenate([[0], breaks])
    lengths = np.diff(np.concatenate([starts, [len(ia)]]))
    return list(zip(ia[starts].tolist(), jb[starts].tolist(), lengths.tolist(), strict=True))


def _key(e: Ev) -> tuple[int, str, str, int]:
    return (e.step, e.scope, e.name, e.call)


def _site_key(e: Ev) -> tuple[str, str, str | None] | str:
    """An event's name, phase and the file and line that made it (the file's name only: the
    runs may run from different directories); its name alone when no call site is recorded."""
    if not e.caller:
        return e.name
    file, _, line = e.caller.rpartition(":")
    return (e.name, e.phase, f"{file.rsplit('/', 1)[-1]}:{line}")


def align_gap(ea: list[Ev], eb: list[Ev], out: Alignment, i_end: int, j_end: int) -> None:
    """Pair or report every event of two decoded gaps; ``i_end``/``j_end``: the positions
    just after the gap in A and B, where an event with no later pair would have been."""
    if [_key(e) for e in ea] == [_key(e) for e in eb]:
        out.pairs += zip(ea, eb, strict=True)
        return
    out.method = "keyed"
    groups_a: dict[tuple[int, str], list[Ev]] = {}
    groups_b: dict[tuple[int, str], list[Ev]] = {}
    for e in ea:
        groups_a.setdefault((e.step, e.scope), []).append(e)
    for e in eb:
        groups_b.setdefault((e.step, e.scope), []).append(e)
    paired_b: set[int] = set()
    gap_pairs: list[tuple[Ev, Ev]] = []
    lone_a: list[Ev] = []
    for g, ga in groups_a.items():
        gb = groups_b.get(g, [])
        na, nb = [e.name for e in ga], [e.name for e in gb]
        if na == nb:
            blocks = [(0, 0, len(na))]
        elif len(na) * len(nb) <= _SEQMATCH_LIMIT:
            sm = difflib.SequenceMatcher(None, na, nb, autojunk=False)
            blocks = [(x, y, n) for x, y, n in sm.get_matching_blocks() if n]
            # An extra call of a module or op (a validation forward between two steps) pairs
            # with the other run's training call by name and position alone; the line that
            # made each call tells them apart. Kept when it pairs as many events (a shifted
            # line in another revision pairs fewer, and the names decide).
            ka, kb = [_site_key(e) for e in ga], [_site_key(e) for e in gb]
            if ka != na and kb != nb:
                sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
                sited = [(x, y, n) for x, y, n in sm.get_matching_blocks() if n]
                if sum(n for *_, n in sited) >= sum(n for *_, n in blocks):
                    blocks = sited
        else:
            pos = {(e.name, e.call): k for k, e in enumerate(gb)}
            blocks = [
                (k, pos[(e.name, e.call)], 1) for k, e in enumerate(ga) if (e.name, e.call) in pos
            ]
        used_a: set[int] = set()
        for x, y, n in blocks:
            for d in range(n):
                gap_pairs.append((ga[x + d], gb[y + d]))
                used_a.add(x + d)
                paired_b.add(gb[y + d].index)
        lone_a += [e for k, e in enumerate(ga) if k not in used_a]
    gap_pairs.sort(key=lambda pr: pr[0].index)
    # Pairs from different groups may cross in B's order: keep them paired (their data is
    # still comparable) but count the crossing as a reordering.
    jb = [pb.index for _, pb in gap_pairs]
    if jb and any(x >= y for x, y in zip(jb, jb[1:], strict=False)):
        out.reordered += len(jb) - len(_lis(jb))
    out.pairs += gap_pairs
    a_pos = [pa.index for pa, _ in gap_pairs]
    b_pos = sorted(jb)
    for e in lone_a:
        k = bisect.bisect_left(a_pos, e.index)
        out.only_a.append((e, gap_pairs[k][1].index if k < len(gap_pairs) else j_end))
    b_to_a = {pb.index: pa.index for pa, pb in gap_pairs}
    for e in eb:
        if e.index not in paired_b:
            k = bisect.bisect_left(b_pos, e.index)
            out.only_b.append((e, b_to_a[b_pos[k]] if k < len(b_pos) else i_end))


def align(sa: RankStream, sb: RankStream) -> Alignment:
    ia, jb, crossed = anchors(sa.hashes(), sb.hashes())
    out = Alignment(runs=_runs(ia, jb), reordered=len(crossed))
    if crossed or len(ia) != len(sa) or len(ia) != len(sb):
        out.method = "anchored"
    # equal events that execute in a different order stay paired (counted as reordered)
    out.pairs += [(sa.event(i), sb.event(j)) for i, j in crossed]
    skip_a = {i for i, _ in crossed}
    skip_b = {j for _, j in crossed}
    bounds = [(-1, -1, 1)] + out.runs + [(len(sa), len(sb), 0)]
    for (i0, j0, n0), (i1, j1, _) in zip(bounds, bounds[1:], strict=False):
        lo_a, lo_b = i0 + n0, j0 + n0
        if lo_a < i1 or lo_b < j1:  # a gap: decode it
            ea = [e for e in sa.events(lo_a, i1) if e.index not in skip_a]
            eb = [e for e in sb.events(lo_b, j1) if e.index not in skip_b]
            if not ea and not eb:
                continue
            if not ea:
                out.only_b += [(e, i1) for e in eb]
            elif not eb:
                out.only_a += [(e, j1) for e in ea]
            else:
                align_gap(ea, eb, out, i1, j1)
    if out.only_a or out.only_b:
        out.method = "keyed" if out.method == "keyed" else "anchored"
    return out
