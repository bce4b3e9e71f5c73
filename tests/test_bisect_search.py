"""The pure searches: bisection with skips, and ddmin, over predicates on positions and
sets (the predicate is the unit's input here, as a launch is in test_bisect.py)."""

from __future__ import annotations

import math
import random

from triage_agent.bisect.search import ddmin, first_bad, probes_left


def _bisect(n: int, bad_from: int, skips: set[int] = frozenset()):
    asked: list[int] = []

    def test(i: int) -> str:
        asked.append(i)
        return "skip" if i in skips else ("bad" if i >= bad_from else "good")

    return first_bad(0, n, test), asked


def test_first_bad_needs_at_most_ceil_log2_probes_without_skips():
    for n in range(1, 130):
        for bad_from in range(1, n + 1):
            br, asked = _bisect(n, bad_from)
            assert br.exact and br.hi == bad_from, (n, bad_from)
            assert len(asked) <= math.ceil(math.log2(n)), (n, bad_from, asked)
            assert len(set(asked)) == len(asked)


def test_first_bad_on_a_thousand_commits_needs_ten_probes():
    worst = max(len(_bisect(1000, b)[1]) for b in range(1, 1001))
    assert worst == 10 == probes_left(0, 1000)


def test_first_bad_costs_one_probe_per_skip_and_is_never_fooled_by_one():
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(2, 300)
        bad_from = rng.randint(1, n)
        skips = {i for i in range(1, n) if rng.random() < 0.15}
        br, asked = _bisect(n, bad_from, skips)
        skipped_asked = [i for i in asked if i in skips]
        assert len(asked) <= math.ceil(math.log2(n)) + 1 + len(skipped_asked), (n, asked)
        # the bracket holds the truth; only skipped positions lie strictly inside it
        assert br.lo < bad_from <= br.hi
        assert all(i in skips for i in range(br.lo + 1, br.hi))
        assert br.exact or br.skipped == list(range(br.lo + 1, br.hi))


def test_first_bad_with_only_skips_between_names_them_all():
    br, asked = _bisect(5, 3, skips={1, 2, 3, 4})
    assert not br.exact and (br.lo, br.hi) == (0, 5) and br.skipped == [1, 2, 3, 4]
    assert sorted(asked) == [1, 2, 3, 4]


def _needs(*required: int):
    calls: list[tuple[int, ...]] = []

    def test(subset: list[int]) -> bool:
        calls.append(tuple(subset))
        return set(required) <= set(subset)

    return test, calls


def test_ddmin_finds_the_interacting_pair_and_no_more():
    test, calls = _needs(3, 11)
    assert ddmin(list(range(16)), test) == [3, 11]
    assert len(calls) == len(set(calls)), "a subset was tested twice"
    assert len(calls) < 40


def test_ddmin_result_is_one_minimal_with_unresolved_tests():
    required = {2, 5, 9}

    def test(subset: list[int]) -> bool | None:
        if 7 in subset and len(subset) < 6:
            return None  # this combination does not build: neither pass nor fail
        return required <= set(subset)

    got = ddmin(list(range(12)), test)
    assert test(got) is True
    assert all(test([x for x in got if x != y]) is not True for y in got)
    assert set(got) == required


def test_ddmin_of_a_single_culprit_is_that_culprit():
    test, _ = _needs(4)
    assert ddmin(list(range(9)), test) == [4]
    test, calls = _needs(0)
    assert ddmin([0], test) == [0] and calls == []
