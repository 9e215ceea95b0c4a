"""The candidate pool's array work gives what the page-by-page definitions give."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.adapters.manifests import Manifest
from gateway.core import Excerpt
from gateway.core.excerpt import ExcerptOption
from gateway.core.outside import Outside, PoolExceeded, check_outside, outside_at, outside_bound
from gateway.core.pages import Page, PageType
from gateway.core.worth import DEFAULT_HALF_LIFE, rank_by_age
from gateway.service.candidate_pool import PoolTable, _first, _frontier, candidate_pool, cost_runs, could_show, refreshed

NOW = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)


def _raises(outside: list[Outside], pops: list[tuple[float, int]], end: int, limit: int) -> bool:
    return _raises_after(outside, pops, end, limit, 0)


def _raises_after(outside: list[Outside], pops: list[tuple[float, int]], end: int, limit: int, regained: int) -> bool:
    try:
        check_outside(outside, pops, end, limit, regained)
    except PoolExceeded:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    outside=st.lists(st.tuples(st.sampled_from([0.1, 0.2, 0.5, 1.0, 2.0]), st.integers(1, 60)), min_size=1, max_size=30),
    pops=st.lists(st.tuples(st.sampled_from([0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0]), st.integers(0, 40)), max_size=12),
    limit=st.integers(0, 300),
)
def test_the_outside_pages_no_other_dominates_decide_the_check(
    outside: list[tuple[float, int]], pops: list[tuple[float, int]], limit: int
) -> None:
    # ties in worth and in cost on purpose: a page as cheap and worth as much as another is covered by it
    totals = np.cumsum([0, *(step for _, step in pops)]).tolist()
    popped = [(value, totals[i]) for i, (value, _) in enumerate(pops)]
    every = [Outside(w, c) for w, c in outside]
    cheapest = np.array([c for _, c in outside], dtype=np.int64)
    kept = _frontier(np.array([w for w, _ in outside]), cheapest, cost_runs(cheapest))
    assert set(kept) <= set(every)
    assert _raises(kept, popped, totals[-1], limit) == _raises(every, popped, totals[-1], limit)


@settings(max_examples=300, deadline=None)
@given(
    outside=st.lists(st.tuples(st.sampled_from([0.1, 0.2, 0.5, 1.0, 2.0]), st.integers(1, 60)), min_size=1, max_size=30),
    pops=st.lists(st.tuples(st.sampled_from([0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0]), st.integers(0, 40)), max_size=12),
    limit=st.integers(0, 300),
    regained=st.integers(0, 20),
)
def test_a_failed_check_names_each_page_left_out_that_could_have_been_shown(
    outside: list[tuple[float, int]], pops: list[tuple[float, int]], limit: int, regained: int
) -> None:
    # what the next pool takes: exactly the pages that, each alone outside, fail the check
    totals = np.cumsum([0, *(step for _, step in pops)]).tolist()
    popped = [(value, totals[i]) for i, (value, _) in enumerate(pops)]
    every = [Outside(w, c) for w, c in outside]
    try:
        check_outside(every, popped, totals[-1], limit, regained)
    except PoolExceeded as exc:
        failed = exc
    else:
        return  # nothing to name
    named = could_show(failed, np.array([w for w, _ in outside]), np.array([c for _, c in outside], dtype=np.int64))
    alone = [_raises_after([page], popped, totals[-1], limit, regained) for page in every]
    assert named.tolist() == alone == [failed.shows(page.worth, page.cheapest) for page in every] and any(alone)


@settings(max_examples=300, deadline=None)
@given(
    pages=st.lists(st.tuples(st.sampled_from([0.1, 0.2, 0.5, 1.0, 2.0]), st.integers(1, 12), st.booleans()), max_size=40),
)
def test_the_frontier_by_costs_is_the_frontier_page_by_page(pages: list[tuple[float, int, bool]]) -> None:
    # the pages outside (the flag) sorted page by page, as the frontier was first found, against the costs' best
    worth = np.array([w if out else -np.inf for w, _, out in pages])
    cheapest = np.array([c for _, c, _ in pages], dtype=np.int64)
    outside = [(w, c) for w, c, out in pages if out]
    expected, least = [], None
    for w, c in sorted(outside, key=lambda p: (-p[0], p[1])):
        if least is None or c < least:
            expected.append(Outside(w, c))
            least = c
    assert _frontier(worth, cheapest, cost_runs(cheapest)) == expected


def _manifest(n: int, hours: float, detail: int, background: int) -> Manifest:
    page = Page(f"{n:08x}", PageType.ORIGINAL, NOW - timedelta(hours=hours), "", "", (), detail)
    return Manifest(page, summary_tokens=min(detail, 20), background_tokens=background, terms={}, length=0)


@pytest.mark.parametrize("seed", range(5))
def test_the_pool_takes_the_pages_first_in_the_fills_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    manifests = {
        m.page.id: m
        for m in (_manifest(n, float(rng.uniform(0, 200)), int(rng.integers(5, 300)), int(rng.integers(3, 40))) for n in range(200))
    }
    roots = list(manifests)
    relevance = {r: float(rng.uniform()) for r in roots}
    seen = {r: NOW - timedelta(minutes=int(rng.integers(0, 300))) for r in roots[::17]}

    def order(r: str) -> tuple[float, float, str]:
        moment = refreshed(manifests[r].page.timestamp, seen.get(r))
        return (-rank_by_age((NOW - moment).total_seconds(), relevance[r], DEFAULT_HALF_LIFE.total_seconds()),
                -moment.timestamp(), r)  # fmt: skip

    room = 300
    least = min(m.bound[1] for m in manifests.values())
    pool, rest = candidate_pool(PoolTable.of(roots, manifests), manifests, relevance, seen, NOW, room, {}, {roots[0]}, 1)
    expected = set(sorted(roots, key=order)[: room // least + 1]) | {roots[0]}
    assert pool == [r for r in roots if r in expected]
    # the rest are bounded by the pages left out: no page outside is worth more than the best of them
    assert rest and max(o.worth for o in rest) >= max(
        rank_by_age((NOW - refreshed(manifests[r].page.timestamp, seen.get(r))).total_seconds(), relevance[r],
                    DEFAULT_HALF_LIFE.total_seconds()) ** 3 * manifests[r].bound[0]
        for r in roots if r not in expected
    )  # fmt: skip


def test_an_excerpted_page_left_outside_is_bounded_by_its_excerpts() -> None:
    # (the request path makes every excerpted page a candidate; the pool still bounds one it is not told to keep)
    manifests = {m.page.id: m for m in (_manifest(n, float(n), 200, 10) for n in range(30))}
    roots = list(manifests)
    relevance = dict.fromkeys(roots, 0.5)
    old = roots[-1]  # the oldest: outside a small pool
    rich = ExcerptOption((0,), "the one line that holds it", 8, 0.9)
    pool, rest = candidate_pool(PoolTable.of(roots, manifests), manifests, relevance, {}, NOW, 40, {old: (None, (rich,), 1.0)}, set())
    assert old not in pool
    age = (NOW - manifests[old].page.timestamp).total_seconds()
    bound = outside_at(rank_by_age(age, 0.5, DEFAULT_HALF_LIFE.total_seconds()), *outside_bound(
        detail_tokens=200, summary_tokens=20, background_tokens=10, excerpts=[Excerpt(8, 0.9)]))  # fmt: skip
    # counted with its excerpt, which is worth more per token than its line or nodes, and more than any other page
    # outside: it is the one the check has to hold
    assert bound.worth > outside_at(rank_by_age(age, 0.5, DEFAULT_HALF_LIFE.total_seconds()), *manifests[old].bound).worth
    assert max(o.worth for o in rest) == pytest.approx(bound.worth, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.sampled_from([1.0, 2.0, 3.0])), min_size=1, max_size=40),
       st.integers(min_value=1, max_value=45), st.randoms(use_true_random=False))
def test_the_first_pages_in_the_fill_s_order_are_those_of_a_full_sort(pages: list[tuple[float, float]], size: int, rnd: random.Random) -> None:
    rank = np.array([r for r, _ in pages])
    stamp = np.array([t for _, t in pages])
    by_id = np.array(rnd.sample(range(len(pages)), len(pages)), dtype=np.int64)
    assert _first(size, rank, stamp, by_id).tolist() == np.lexsort((by_id, -stamp, -rank))[:size].tolist()


def _tables_equal(a: PoolTable, b: PoolTable) -> None:
    assert (a.roots, a.position, a.in_id_order) == (b.roots, b.position, b.in_id_order)
    for name in ("written_us", "written_ts", "gain", "cheapest", "by_id"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert all(np.array_equal(x, y) for x, y in zip(a.runs, b.runs))


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.integers(0, 10_000), min_size=1, max_size=40, unique=True), grown=st.lists(st.integers(0, 40), max_size=3))
def test_a_table_grown_by_pages_is_the_table_of_all_of_them(ids: list[int], grown: list[int]) -> None:
    manifests = {m.page.id: m for m in (_manifest(n, n % 97, 5 + n % 13, 3 + n % 7) for n in ids)}
    roots = list(manifests)
    cuts = sorted({min(c, len(roots)) for c in grown} | {len(roots)})
    table = PoolTable.of(roots[: cuts[0]], manifests)
    for start, end in zip(cuts, cuts[1:]):
        table = table.grown(roots[start:end], manifests)
        _tables_equal(table, PoolTable.of(roots[:end], manifests))
    _tables_equal(table, PoolTable.of(roots, manifests))
