from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.budget import Candidate, Demotion, FitResult, Level, fit_context, fit_rendered, priority, shows_whole
from gateway.core.errors import ContextWindowExceeded
from gateway.core.pages import Page, PageType
from gateway.core.render import NodeSpec, RenderInput, background_line, background_lines, render_context
from gateway.core.tokens import TokenCounter
from gateway.core.views import View
from gateway.core.worth import BACKGROUND_OVERHEAD, DAY_OVERHEAD, DEFAULT_HALF_LIFE, MAP_OVERHEAD, NODE_OVERHEAD, Excerpt, rank

NOW = datetime(2026, 2, 14, 12, 0, tzinfo=timezone.utc)
S, D, U = View.SUMMARY, View.DETAIL, View.UNPACKED


def cand(cid: str, relevance: float = 0.5, hours: float = 1, summary: int = 10, detail: int = 100,
         view: View = D, background: int = 5, unpacked: int | None = None) -> Candidate:
    return Candidate(cid, relevance, NOW - timedelta(hours=hours), summary, detail, view, background, unpacked)


def fit(candidates: list[Candidate], budget: int, fixed: int = 0, window: int | None = None) -> FitResult:
    return fit_context(candidates, fixed_tokens=fixed, budget=budget, now=NOW, window=window, node_overhead=0,
                       background_overhead=0, day_overhead=0, map_overhead=0)


def test_priority_is_a_double_decay() -> None:
    assert priority(cand("a", 1.0, 0), NOW) == 1.0
    assert priority(cand("a", 0.0, 0), NOW) == pytest.approx(0.1)
    assert priority(cand("a", 1.0, 24), NOW) == pytest.approx(0.9)
    assert priority(cand("a", 1.0, 24), NOW, half_life=timedelta(hours=12)) == pytest.approx(0.85)
    assert priority(cand("a", 1.0, 24 * 365), NOW) == pytest.approx(0.8)  # age takes at most a fifth
    assert priority(cand("old but relevant", 1.0, 24 * 90), NOW) > priority(cand("fresh", 0.2, 0), NOW)
    assert priority(cand("a", 1.0, -5), NOW) == 1.0
    assert DEFAULT_HALF_LIFE == timedelta(hours=24)


def test_everything_fits_whole() -> None:
    # with room for everything, every page is shown whole, whatever the router asked for
    result = fit_context([cand("a"), cand("b", view=S)], fixed_tokens=50, budget=10_000, now=NOW)
    assert dict(result.views) == {"a": D, "b": D}
    assert result.total_tokens == 50 + 2 * (100 + NODE_OVERHEAD)
    assert (result.over_budget, result.demotions, result.background_ids, result.dropped_ids) == (False, (), (), ())
    assert result.limit == 10_000


def test_shows_whole_when_every_page_is_whole_as_a_node_an_excerpt_or_a_line() -> None:
    line = replace(cand("line", background=30, detail=30), content_on_line=True)  # its line holds it
    cut = replace(cand("cut", detail=120), excerpts=(Excerpt(20, 0.4), Excerpt(110, 1.0)))  # its last excerpt is it
    pages = [cand("node", relevance=0.0), line, cut]
    roomy = fit(pages, budget=10_000)
    assert (dict(roomy.views), roomy.background_ids, dict(roomy.excerpts)) == ({"node": D}, ("cut", "line"), {"cut": 1})
    assert shows_whole(roomy, pages)
    # too little room: one page is cut (an excerpt, a Summary node or a line that does not hold it) or left out
    for budget in (100, 150, 200, 241):  # all whole takes 242
        tight = fit(pages, budget=budget)
        assert not shows_whole(tight, pages), budget
    summary_only = replace(roomy, views={"node": S})
    assert not shows_whole(summary_only, pages)
    # a Summary node as long as its page covers it, as the fill counts it
    assert shows_whole(summary_only, [replace(pages[0], summary_tokens=100), *pages[1:]])
    # over its limit: not a choice that counts, whatever it shows
    assert not shows_whole(replace(roomy, over_budget=True), pages)


def test_many_pages_in_part_beat_a_few_whole() -> None:
    # four equally relevant pages: their lines (half of each page for 21 tokens) are worth more per token than
    # any one Detail node (the other half for 79 more), so a budget of 100 shows all four as lines
    pages = [replace(cand(c, 1.0, hours=h, background=20), line_coverage=0.5) for c, h in (("a", 4), ("b", 3), ("c", 2), ("d", 1))]
    result = fit(pages, budget=100)
    assert (dict(result.views), result.background_ids, result.total_tokens) == ({}, ("a", "b", "c", "d"), 84)
    # with room to spare, the best (newest) page's Detail comes next
    assert dict(fit(pages, budget=170).views) == {"d": D}


def test_a_relevant_page_gets_detail_when_that_beats_more_pages() -> None:
    relevant = replace(cand("rel", 1.0, background=20), line_coverage=0.5)
    others = [replace(cand(c, 0.0, background=20), line_coverage=0.5) for c in ("x", "y", "z")]
    result = fit([relevant, *others], budget=150)
    assert result.views == {"rel": D}
    assert result.background_ids and "rel" not in result.background_ids and result.total_tokens <= 150


def test_a_page_is_worth_the_tokens_that_can_hold_the_answer() -> None:
    # a question about the user: the long reply's page holds the user's 60 words in a 70-token excerpt that covers
    # them all; the other page is a short exchange shown whole on its line, a little less relevant
    reply = replace(cand("reply", 1.0, hours=0, detail=600, background=200), line_coverage=0.0, excerpts=(Excerpt(70, 1.0),))
    short = replace(cand("short", 0.97, hours=0, detail=70, background=70), content_on_line=True, line_coverage=1.0)
    # counted on all its 600 tokens, the reply's excerpt outweighs the other page many times over ...
    assert dict(fit([reply, short], budget=75).excerpts) == {"reply": 0}
    # ... counted on the 60 that can hold a fact about the user, the more relevant per token wins
    mine = replace(reply, worth_tokens=60)
    assert fit([mine, short], budget=75).background_ids == ("short",)
    # and with room for both, the Detail node adds nothing the excerpt does not hold
    assert fit([mine, short], budget=2_000).views == {}
    with pytest.raises(ValueError):
        replace(reply, worth_tokens=601)


def test_an_excerpt_is_the_step_between_a_line_and_detail() -> None:
    # a long page whose line holds little: its best-matching messages (40 tokens, two thirds of it) are the step
    page = replace(cand("a", 1.0, detail=400, background=20), line_coverage=0.1,
                   excerpts=(Excerpt(40, 0.6), Excerpt(90, 0.8)))
    result = fit([page], budget=60)
    assert (result.background_ids, dict(result.excerpts), result.total_tokens) == (("a",), {"a": 0}, 41)
    assert dict(fit([page], budget=200).excerpts) == {"a": 1}
    assert dict(fit([page], budget=1_000).views) == {"a": D} and not fit([page], budget=1_000).excerpts
    # a step that no longer fits gives way to a smaller one: the first excerpt is skipped when the second is
    # the better step but only the first fits
    skipping = replace(page, excerpts=(Excerpt(60, 0.3), Excerpt(70, 0.9)))
    assert dict(fit([skipping], budget=72).excerpts) == {"a": 1}
    assert dict(fit([skipping], budget=65).excerpts) == {"a": 0}


def test_detail_needs_the_content_at_hand() -> None:
    far = replace(cand("a", 1.0, summary=50, background=20), detail=False)
    assert fit([far], budget=10_000).views == {"a": S}
    assert fit([replace(far, summary_on_line=True)], budget=10_000).background_ids == ("a",)


def test_a_page_the_model_opened_keeps_its_view() -> None:
    # pinned: the model asked for it; lines of the others would be worth more per token, but come after
    opened = replace(cand("open", 0.0, background=20), pinned=True)
    others = [replace(cand(c, 1.0, background=20), line_coverage=0.9) for c in ("x", "y")]
    result = fit([opened, *others], budget=150)
    assert dict(result.views) == {"open": D} and result.background_ids == ("x", "y")
    # one whose line holds everything too
    whole = replace(opened, content_on_line=True, summary_on_line=True)
    assert dict(fit([whole], budget=150).views) == {"open": D}


def test_a_container_s_map_entry_is_weighed_and_given_back_once_a_page_of_it_is_shown() -> None:
    # two laid-open topics, each offered a 10-token map entry; a page of the first matches best
    maps = [replace(cand(c, 0.01, summary=300, detail=400, background=200), excerpts=(Excerpt(10, 0.02),), map_entry=0) for c in ("pasta", "bikes")]
    page = replace(cand("salt", 1.0, summary=90, detail=100, background=30), line_coverage=1.0, inside="pasta")
    named = fit([*maps, page], budget=50)  # 31 + 11: the page first (it is worth more), then the other topic's entry
    assert set(named.background_ids) == {"bikes", "salt"} and dict(named.excerpts) == {"bikes": 0} and named.total_tokens == 42
    assert named.mapped == {"bikes"}
    # once a page of it is shown, the entry is not taken again, however much room is left (its line or a node still may be)
    assert "pasta" not in fit([*maps, page], budget=500).excerpts
    # an entry taken before a page of its topic is given back when the page comes, and the page may take its place
    first = replace(page, relevance=0.0, line_coverage=0.05)
    assert set(fit([*maps, first], budget=22).background_ids) == {"pasta", "bikes"}  # the entries are worth more
    assert dict(fit([*maps, first], budget=22).excerpts) == {"pasta": 0, "bikes": 0}
    later = fit([*maps, first], budget=60)  # then the page comes, and its topic's entry goes
    assert set(later.background_ids) == {"bikes", "salt"} and dict(later.excerpts) == {"bikes": 0} and later.total_tokens == 42
    # a page of no container gives nothing back
    alone = replace(page, inside=None)
    assert set(fit([*maps, alone], budget=53).background_ids) == {"pasta", "bikes", "salt"}
    with pytest.raises(ValueError, match="map_entry"):
        replace(maps[0], map_entry=1)


def test_a_container_whose_entry_was_given_back_may_still_take_its_line() -> None:
    # a topic whose line shows no more of it than its entry: from the entry no step leads on, but once a page of it
    # gives the entry back, the line is offered from nothing again
    topic = replace(cand("topic", 1.0, summary=30, detail=400, background=30), excerpts=(Excerpt(10, 0.1),), map_entry=0,
                    line_coverage=0.1, summary_on_line=True, detail=False)
    page = replace(cand("salt", 0.6, summary=90, detail=100, background=30), line_coverage=1.0, inside="topic")
    assert fit([topic, page], budget=11).mapped == {"topic"}  # the entry is worth more per token than the page
    result = fit([topic, page], budget=500)
    assert set(result.background_ids) == {"topic", "salt"} and "topic" not in result.excerpts and not result.mapped


def test_map_entries_are_filed_under_one_heading_and_a_container_shown_otherwise_leaves_it() -> None:
    # three topics of three days: their entries share the map's heading (3 tokens), not three date lines (7 each)
    maps = [
        replace(cand(c, 0.01, hours=24 * (3 - k), summary=300, detail=400, background=12), excerpts=(Excerpt(10, 0.02),), map_entry=0, line_coverage=0.022)
        for k, c in enumerate(("pasta", "bikes", "taxes"))
    ]

    def dated(budget: int) -> FitResult:
        return fit_context(maps, fixed_tokens=0, budget=budget, now=NOW, node_overhead=0, background_overhead=0, day_overhead=7)

    assert dated(36).mapped == {"pasta", "bikes", "taxes"} and dated(36).total_tokens == 3 + 3 * 11  # (the heading: 3)
    # with room, a topic's line shows more of it than its entry: it leaves the map and is filed under its own day
    wide = dated(46)  # room for one: the newest
    assert wide.mapped == {"pasta", "bikes"} and "taxes" not in wide.excerpts and "taxes" in wide.background_ids
    assert wide.total_tokens == 3 + 2 * 11 + 7 + 13
    assert dated(60).mapped == set() and dated(60).total_tokens == 3 * (7 + 13)


def test_a_line_that_becomes_its_map_entry_pays_the_map_s_heading() -> None:
    # a topic's line first (more per token), then its entry (more of it): the entry leaves the day, whose heading
    # another page still needs, for the map's, which costs 3 more; at 49 it does not fit, at 52 it does
    topic = replace(cand("topic", 1.0, summary=300, detail=400, background=10), excerpts=(Excerpt(20, 0.9),), map_entry=0,
                    line_coverage=0.5)
    other = replace(cand("other", 1.0, summary=300, detail=400, background=10), line_coverage=1.0)

    def dated(budget: int) -> FitResult:
        return fit_context([topic, other], fixed_tokens=0, budget=budget, now=NOW, node_overhead=0, background_overhead=10,
                           day_overhead=7, map_overhead=3)

    assert not dated(49).mapped and dated(49).total_tokens == 10 + 7 + 11 + 11 and not dated(49).over_budget
    assert dated(52).mapped == {"topic"} and dated(52).total_tokens == 10 + 7 + 11 + 3 + 21


def test_a_floor_excerpt_is_taken_before_any_page_is_weighed_and_the_rest_by_value() -> None:
    # the exchange a turn follows: its question (its first excerpt) however little it matches; more of it only by value
    follows = replace(cand("follows", 1e-6, hours=0, detail=300, background=40), line_coverage=0.0,
                      excerpts=(Excerpt(30, 0.1), Excerpt(120, 0.4)), floor=0)
    matching = [replace(cand(c, 1.0, background=20), line_coverage=0.9) for c in ("x", "y", "z")]
    result = fit([follows, *matching], budget=80)
    assert result.excerpts == {"follows": 0} and len(result.background_ids) == 3  # 31 + 21 + 21: two of three lines
    assert set(result.background_ids) - {"follows"} <= {"x", "y", "z"}
    without = fit([replace(follows, floor=None), *matching], budget=80)
    assert "follows" not in without.background_ids  # weighed with the others, it loses
    with pytest.raises(ValueError, match="floor"):
        replace(follows, floor=2)


def test_a_summary_whole_on_its_line_is_never_a_summary_node() -> None:
    on_line = [Candidate(c, 0.5, NOW - timedelta(hours=h), 30, 40, S, 36, summary_on_line=True) for c, h in (("a", 2), ("b", 1))]
    result = fit_context(on_line, fixed_tokens=0, budget=100, now=NOW, background_overhead=0, day_overhead=0)
    assert (dict(result.views), result.background_ids, result.total_tokens) == ({}, ("a", "b"), 74)
    # a summary longer than its line is a step of its own
    plain = [Candidate(c, 0.5, NOW - timedelta(hours=h), 30, 40, S, 6) for c, h in (("a", 2), ("b", 1))]
    assert dict(fit_context(plain, fixed_tokens=0, budget=84, now=NOW, background_overhead=0, day_overhead=0).views) == {"b": S}


def test_a_page_whole_on_its_line_is_never_a_detail_node() -> None:
    # its line holds every message verbatim: a Detail node would only add its tags
    whole = [Candidate(c, 0.9, NOW - timedelta(hours=h), 30, 40, D, 45, summary_on_line=True, content_on_line=True) for c, h in (("a", 2), ("b", 1))]
    for budget in (100, 1_000):
        result = fit_context(whole, fixed_tokens=0, budget=budget, now=NOW, background_overhead=0, day_overhead=0)
        assert (dict(result.views), result.background_ids, result.total_tokens) == ({}, ("a", "b"), 92)
    # a line that holds only the summary leaves room for one Detail node, nothing else
    summary_only = [replace(c, content_on_line=False, line_coverage=0.5) for c in whole]
    assert dict(fit_context(summary_only, fixed_tokens=0, budget=100, now=NOW, background_overhead=0, day_overhead=0).views) == {"b": D}


def test_the_first_node_pays_for_the_instructions_line_on_nodes() -> None:
    pages = [cand("a", relevance=1.0, summary=25, detail=30), cand("b", relevance=1.0, summary=25, detail=30, hours=0.5)]
    kwargs = dict(fixed_tokens=0, now=NOW, node_overhead=0, background_overhead=0, day_overhead=0)
    both = fit_context(pages, budget=60, **kwargs)  # type: ignore[arg-type]
    assert dict(both.views) == {"a": D, "b": D} and both.total_tokens == 60
    # with 20 tokens of instructions for the first node, only one Detail fits; the other page keeps its line
    explained = fit_context(pages, budget=60, flow_overhead=20, **kwargs)  # type: ignore[arg-type]
    assert dict(explained.views) == {"b": D} and explained.background_ids == ("a",)
    assert explained.total_tokens == 20 + 30 + 6
    # lines alone never pay it
    lines = fit_context(pages, budget=12, flow_overhead=20, **kwargs)  # type: ignore[arg-type]
    assert lines.background_ids == ("a", "b") and lines.total_tokens == 12


def test_background_envelope_is_counted_once() -> None:
    result = fit_context([cand("a", view=S), cand("b", view=S, hours=0.5)], fixed_tokens=0, budget=19, now=NOW,
                         node_overhead=0, background_overhead=BACKGROUND_OVERHEAD, day_overhead=0)
    # "b" (newer on the tie) takes its Summary (10); "a" as a line would cost 6 + the envelope (10) = 26 > 19
    assert (dict(result.views), result.background_ids, result.dropped_ids, result.total_tokens) == ({"b": S}, (), ("a",), 10)


def test_lines_are_filed_under_one_date_line_per_day() -> None:
    day = [replace(cand(c, view=S, hours=h, background=20), detail=False) for c, h in (("a", 3), ("b", 2), ("c", 1))]
    folded = fit_context(day, fixed_tokens=0, budget=70, now=NOW, node_overhead=1_000, background_overhead=0)
    # three lines of 20 (+1 for the line break) and one date line for the three of them
    assert (folded.background_ids, folded.total_tokens) == (("a", "b", "c"), 3 * 21 + DAY_OVERHEAD)
    # on three days, the third line does not fit with its own date line
    days = [replace(c, timestamp=c.timestamp - timedelta(days=i), written=None) for i, c in enumerate(day)]
    spread = fit_context(days, fixed_tokens=0, budget=70, now=NOW, node_overhead=1_000, background_overhead=0)
    assert (len(spread.background_ids), spread.total_tokens) == (2, 2 * (21 + DAY_OVERHEAD))
    # a page whose timestamp was shifted (refreshed by use) is still filed under its own date
    refreshed = [replace(day[0], timestamp=NOW + timedelta(days=3)), *day[1:]]
    assert refreshed[0].day == NOW.date()
    again = fit_context(refreshed, fixed_tokens=0, budget=70, now=NOW, node_overhead=1_000, background_overhead=0)
    assert (len(again.background_ids), again.total_tokens) == (3, 3 * 21 + DAY_OVERHEAD)


def test_unpacked_is_offered_only_when_asked_and_steps_down_to_detail_only_when_smaller() -> None:
    small_detail = replace(cand("a", unpacked=300, detail=100, view=U), pinned=True)
    assert dict(fit([small_detail], budget=150).views) == {"a": D}
    assert dict(fit([small_detail], budget=1_000).views) == {"a": U}
    assert dict(fit([replace(small_detail, view=D, unpacked_tokens=None)], budget=1_000).views) == {"a": D}
    big_detail = replace(cand("b", unpacked=300, detail=400, view=U), pinned=True)
    result = fit([big_detail], budget=150)
    assert dict(result.views) == {"b": S}
    assert result.demotions[0].before is Level.UNPACKED and result.demotions[0].after is Level.SUMMARY


def test_client_parts_over_budget_give_the_smallest_context() -> None:
    result = fit([cand("a"), cand("b")], budget=8_000, fixed=10_000, window=128_000)
    assert result.over_budget and result.total_tokens == 10_000
    assert dict(result.views) == {} and set(result.dropped_ids) == {"a", "b"}
    assert all(d.after is Level.DROPPED for d in result.demotions)


def test_window_caps_the_budget_and_only_the_window_is_an_error() -> None:
    assert fit([cand("a")], budget=1_000, window=50).limit == 50
    with pytest.raises(ContextWindowExceeded) as caught:
        fit([cand("a")], budget=1_000, fixed=5_000, window=4_096)
    assert (caught.value.needed, caught.value.window) == (5_000, 4_096)
    assert "4096" in str(caught.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: cand("a", relevance=1.5),
        lambda: cand("a", detail=-1),
        lambda: cand("a", view=U),
        lambda: fit([cand("a"), cand("a")], budget=10),
        lambda: fit([], budget=-1),
        lambda: fit([], budget=1, window=-1),
    ],
)
def test_invalid_inputs(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_naive_timestamps_are_utc() -> None:
    assert Candidate("a", 0, datetime(2026, 1, 1), 1, 1).timestamp.tzinfo is timezone.utc


# --- properties -------------------------------------------------------------------------------------------------

@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    count = draw(st.integers(min_value=0, max_value=10))
    found = []
    for i in range(count):
        view = draw(st.sampled_from([S, D, U]))
        found.append(
            Candidate(
                f"{i:08x}",
                draw(st.floats(min_value=0, max_value=1)),
                NOW - timedelta(minutes=draw(st.integers(min_value=-10, max_value=10_000))),
                draw(st.integers(min_value=0, max_value=300)),
                draw(st.integers(min_value=0, max_value=3_000)),
                view,
                draw(st.integers(min_value=0, max_value=60)),
                draw(st.integers(min_value=0, max_value=5_000)) if view is U else None,
                draw(st.booleans()),
                draw(st.booleans()),
                excerpts=tuple(
                    Excerpt(draw(st.integers(min_value=0, max_value=500)), draw(st.floats(min_value=0, max_value=1)))
                    for _ in range(draw(st.integers(min_value=0, max_value=3)))
                ),
                line_coverage=draw(st.one_of(st.none(), st.floats(min_value=0, max_value=1))),
                pinned=draw(st.booleans()),
                detail=draw(st.booleans()),
            )
        )
    # some are containers with a map entry (their first excerpt), and some pages sit inside one of them
    mapped = [c.id for c in found if c.excerpts and draw(st.booleans())]
    for k, c in enumerate(found):
        entry = 0 if c.id in mapped else None
        inside = draw(st.one_of(st.none(), st.sampled_from(mapped))) if mapped and c.id not in mapped else None
        found[k] = replace(c, map_entry=entry, inside=inside)
    return found


def estimate(result: FitResult, cands: list[Candidate], fixed: int) -> int:
    by_id = {c.id: c for c in cands}

    def size(c: Candidate, view: View) -> int:
        return {S: c.summary_tokens, D: c.detail_tokens, U: c.unpacked_tokens or 0}[view]

    nodes = sum(size(by_id[i], v) + NODE_OVERHEAD for i, v in result.views.items())
    folded = sum(
        (by_id[i].excerpts[result.excerpts[i]].tokens if i in result.excerpts else by_id[i].background_tokens) + 1
        for i in result.background_ids
    )
    days = {by_id[i].day for i in result.background_ids if i not in result.mapped}
    heading = MAP_OVERHEAD if result.mapped else 0
    return fixed + nodes + folded + (BACKGROUND_OVERHEAD if result.background_ids else 0) + DAY_OVERHEAD * len(days) + heading


@settings(max_examples=300, deadline=None)
@given(candidates(), st.integers(min_value=0, max_value=5_000), st.integers(min_value=0, max_value=20_000),
       st.one_of(st.none(), st.integers(min_value=0, max_value=30_000)))
def test_never_over_budget_when_the_budget_can_be_met(
    cands: list[Candidate], fixed: int, budget: int, window: int | None
) -> None:
    limit = budget if window is None else min(budget, window)
    if window is not None and fixed > window:
        with pytest.raises(ContextWindowExceeded):
            fit_context(cands, fixed_tokens=fixed, budget=budget, now=NOW, window=window)
        return
    result = fit_context(cands, fixed_tokens=fixed, budget=budget, now=NOW, window=window)
    assert result.total_tokens == estimate(result, cands, fixed)
    assert result.over_budget is (fixed > limit)
    if fixed <= limit:
        assert result.total_tokens <= limit
    placed = list(result.views) + list(result.background_ids) + list(result.dropped_ids)
    assert sorted(placed) == sorted(c.id for c in cands)
    assert set(result.excerpts) <= set(result.background_ids)
    by_id = {c.id: c for c in cands}
    assert all(result.excerpts[i] == by_id[i].map_entry for i in result.mapped)
    for c in cands:
        if c.inside is not None and (c.id in result.views or c.id in result.background_ids):
            assert c.inside not in result.mapped  # a page of a topic shown gives the topic's entry back
        view = result.views.get(c.id)
        if view is U:
            assert c.view is U  # Unpacked only when asked for
        if view is D and not c.pinned:
            assert c.detail and not c.content_on_line  # Detail only with the content at hand, and when it adds


# --- the real rendering -----------------------------------------------------------------------------------------

COUNTER = TokenCounter()
CLIENT = 1_000  # the client's system prompt and recent turns


def make_pages(n: int) -> list[Page]:
    return [
        Page(f"{i:08x}", PageType.ORIGINAL, NOW - timedelta(hours=n - i), f"user: question {i}?\nassistant: "
             + "A detailed answer with <tags> & entities. " * (5 + 3 * i), f"Question {i} answered.", (), 0)
        for i in range(n)
    ]


PAGES = make_pages(8)
BY_ID = {p.id: p for p in PAGES}
CANDIDATES = [
    Candidate(p.id, (i % 3) / 2, p.timestamp, COUNTER.count(p.summary), COUNTER.count(p.content), D,
              COUNTER.count(background_line(p)))
    for i, p in enumerate(PAGES)
]


def render_for(result: FitResult) -> str:
    nodes = tuple(NodeSpec(BY_ID[i], v) for i, v in result.views.items())
    background = background_lines(BY_ID[i] for i in result.background_ids)
    return render_context(RenderInput(now=NOW, query="What was question 3?", nodes=nodes, background=background))


def measure(result: FitResult) -> int:
    return CLIENT + COUNTER.count(render_for(result))


SKELETON = measure(FitResult({}, (), (), 0, False, (), 0))


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=SKELETON + CLIENT - 50, max_value=SKELETON + 3_000))
def test_fit_rendered_never_exceeds_the_budget_of_the_real_output(budget: int) -> None:
    result = fit_rendered(CANDIDATES, fixed_tokens=SKELETON, budget=budget, now=NOW, measure=measure,
                          node_overhead=0, background_overhead=0)  # deliberately optimistic estimates
    assert result.total_tokens == measure(result)
    if SKELETON <= budget:
        assert result.total_tokens <= budget and not result.over_budget
    else:
        assert result.over_budget


def test_fit_rendered_falls_back_to_the_smallest_context() -> None:
    def liar(result: FitResult) -> int:
        return 10 if not result.views and not result.background_ids else 10**6

    result = fit_rendered(CANDIDATES, fixed_tokens=10, budget=5_000, now=NOW, measure=liar, max_rounds=2)
    assert result.total_tokens == 10 and not result.over_budget
    assert set(result.dropped_ids) == set(BY_ID)


def test_fit_rendered_reports_the_window_error() -> None:
    with pytest.raises(ContextWindowExceeded):
        fit_rendered(CANDIDATES, fixed_tokens=10, budget=5_000, now=NOW, measure=lambda r: 9_000, window=8_000)
    with pytest.raises(ContextWindowExceeded):
        fit_rendered(CANDIDATES, fixed_tokens=9_000, budget=5_000, now=NOW, measure=measure, window=8_000)


def test_rank_is_the_priority_before_a_candidate_is_made() -> None:
    page = cand("a", 0.7, 30)
    assert rank(page.relevance, page.timestamp, NOW) == priority(page, NOW)
    naive = (NOW - timedelta(hours=30)).replace(tzinfo=None)  # a naive time is UTC, as a Candidate takes it
    assert rank(0.7, naive, NOW) == priority(page, NOW)
