from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.errors import IllegalTransition
from gateway.core.segmentation import (
    TRANSITIONS,
    Buffer,
    Flush,
    FlushReason,
    SegmentationPolicy,
    SegmentBlock,
    SegmentEvent,
    SegmentState,
    admit,
    cosine,
    flush_if_idle,
    flush_now,
    next_segment_state,
    normalise,
    with_head_summary,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
POLICY = SegmentationPolicy()
W = POLICY.lookahead
DIM = 4


def unit(axis: int, wobble: float = 0.0) -> tuple[float, ...]:
    vector = [wobble] * DIM
    vector[axis] = 1.0
    return tuple(vector)


def blk(pid: str, axis: int = 0, *, tokens: int = 100, free: bool = False, minute: int = 0,
        wobble: float = 0.1) -> SegmentBlock:
    return SegmentBlock(pid, tokens, free, unit(axis, wobble), T0 + timedelta(minutes=minute))


def vec(pid: str, vector: tuple[float, ...], *, tokens: int = 100, minute: int = 0) -> SegmentBlock:
    return SegmentBlock(pid, tokens, False, vector, T0 + timedelta(minutes=minute))


def topics(*lengths: int, start: int = 0) -> list[SegmentBlock]:
    """Runs of pages on axis 0, 1, 2, ... of the given lengths, one minute apart, numbered from ``start``."""
    axes = [axis for axis, length in enumerate(lengths) for _ in range(length)]
    return [blk(f"p{start + i}", axis, minute=start + i) for i, axis in enumerate(axes)]


def feed(blocks: list[SegmentBlock], policy: SegmentationPolicy = POLICY,
         buffer: Buffer | None = None) -> tuple[Buffer, list[Flush]]:
    current, flushes = buffer or Buffer(), []
    for block in blocks:
        current, flush = admit(current, block, policy)
        if flush is not None:
            flushes.append(flush)
    return current, flushes


def runs(blocks: list[SegmentBlock], policy: SegmentationPolicy = POLICY) -> list[tuple[str, ...]]:
    """The pages of each flush, then of the /save flush of the rest."""
    buffer, flushes = feed(blocks, policy)
    last = flush_now(buffer)[1]
    return [f.page_ids for f in flushes] + ([last.page_ids] if last else [])


def ids(*numbers: int) -> tuple[str, ...]:
    return tuple(f"p{n}" for n in numbers)


def pending_ids(buffer: Buffer) -> tuple[str, ...]:
    return tuple(b.page_id for b in buffer.pending)


def direction(buffer: Buffer) -> tuple[float, ...]:
    assert buffer.topic_sum is not None
    return normalise(buffer.topic_sum)


# -- where a topic ends ------------------------------------------------------------------------------------------


def test_three_topics_are_cut_at_their_first_pages_once_the_lookahead_has_come() -> None:
    blocks = topics(4, 4, 4)
    buffer, flushes = feed(blocks[:7])
    assert not flushes  # p4 opened a topic, but only W pages after it tell
    assert (buffer.page_ids, pending_ids(buffer)) == (ids(0, 1, 2, 3), ids(4, 5, 6))
    buffer, flush = admit(buffer, blocks[7], POLICY)
    assert flush == Flush(ids(0, 1, 2, 3), FlushReason.DRIFT, "p0", None, carry=False)
    assert (buffer.topic_id, buffer.page_ids, pending_ids(buffer), buffer.tokens) == ("p4", ids(4), ids(5, 6, 7), 100)
    assert (buffer.started_at, buffer.last_at) == (T0 + timedelta(minutes=4), T0 + timedelta(minutes=7))
    assert runs(blocks) == [ids(0, 1, 2, 3), ids(4, 5, 6, 7), ids(8, 9, 10, 11)]


def test_a_new_buffer_commits_its_first_page_at_once_and_the_next_ones_wait_for_the_lookahead() -> None:
    first, flush = admit(Buffer(), blk("p0", wobble=0.0), POLICY)
    assert flush is None and first.state is SegmentState.COLLECTING and not first.pending
    assert (first.topic_id, first.page_ids, first.topic_sum, first.tokens) == ("p0", ids(0), unit(0), 100)
    buffer, _ = feed(topics(W + 1)[1:W + 1], buffer=first)
    assert (buffer.page_ids, pending_ids(buffer), buffer.tokens, buffer.held_tokens) == (ids(0), ids(1, 2, 3), 100, 400)
    buffer, flush = admit(buffer, blk("p4", minute=4), POLICY)  # p1 has W pages after it: it joins
    assert flush is None and (buffer.page_ids, pending_ids(buffer), buffer.tokens) == (ids(0, 1), ids(2, 3, 4), 200)
    assert buffer.held_ids == ids(0, 1, 2, 3, 4)
    assert direction(buffer) == pytest.approx(normalise([a + b for a, b in zip(unit(0), blk("p1").vector)]))


def test_the_lookahead_is_a_knob() -> None:
    assert runs(topics(2, 2, 2), SegmentationPolicy(lookahead=1)) == [ids(0, 1), ids(2, 3), ids(4, 5)]
    assert runs(topics(2, 2, 2)) == [ids(0, 1, 2, 3, 4, 5)]  # no topic lasts the W = 3 pages that tell it apart


def test_a_smaller_lookahead_than_the_buffer_was_built_with_drains_its_backlog_up_to_the_first_flush() -> None:
    buffer, _ = feed(topics(4))
    assert pending_ids(buffer) == ids(1, 2, 3)
    one = SegmentationPolicy(lookahead=1)
    joined, flush = admit(buffer, blk("p4", minute=4), one)
    assert flush is None and (joined.page_ids, pending_ids(joined)) == (ids(0, 1, 2, 3), ids(4))
    stopped, flush = admit(feed(topics(1, 3))[0], blk("p4", axis=1, minute=4), one)  # p1 opens a topic: p2 waits
    assert flush is not None and flush.page_ids == ids(0) and pending_ids(stopped) == ids(2, 3, 4)


def test_a_lone_outlier_stays_in_the_topic() -> None:
    blocks = [*topics(3), blk("p3", axis=2, minute=3), *[blk(f"p{i}", minute=i) for i in range(4, 8)]]
    assert runs(blocks) == [ids(*range(8))]


def test_a_page_nearer_what_follows_but_still_like_the_topic_joins_it() -> None:
    # margin met (0.6 to the topic, 1.0 to what follows) but p4 with what follows still resembles the topic
    near = (0.6, 0.8, 0.0, 0.0)
    blocks = [blk(f"p{i}", wobble=0.0, minute=i) for i in range(4)] + [vec(f"p{i}", near, minute=i) for i in range(4, 8)]
    assert runs(blocks) == [ids(*range(8))]
    assert cosine(unit(0), near) > POLICY.drift_overlap
    assert runs(blocks, SegmentationPolicy(drift_overlap=0.7)) == [ids(0, 1, 2, 3), ids(4, 5, 6, 7)]


def test_a_page_unlike_both_sides_stays_with_the_topic_before_it() -> None:
    # p4 resembles neither the topic nor what follows (the margin is not met); the next topic opens after it
    blocks = [*topics(4), blk("p4", axis=1, wobble=0.0, minute=4), *[blk(f"p{i}", axis=2, wobble=0.0, minute=i) for i in range(5, 9)]]
    assert runs(blocks) == [ids(0, 1, 2, 3, 4), ids(5, 6, 7, 8)]
    assert runs(blocks, SegmentationPolicy(drift_margin=-0.5)) == [ids(0, 1, 2, 3), ids(4), ids(5, 6, 7, 8)]


def test_the_topic_is_the_mean_of_its_committed_pages() -> None:
    leaning = vec("p1", (1.0, 1.0, 0.0, 0.0), minute=1)
    buffer, _ = feed([blk("p0", wobble=0.0), leaning, *[blk(f"p{i}", wobble=0.0, minute=i) for i in range(2, 5)]])
    assert buffer.page_ids == ids(0, 1)
    assert direction(buffer) == pytest.approx(normalise([1.0 + math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0]))


# -- neutral pages ------------------------------------------------------------------------------------------------


def test_a_neutral_page_with_nothing_pending_is_committed_with_the_page_before_it() -> None:
    start, _ = admit(Buffer(), blk("p0"), POLICY)
    after, flush = admit(start, blk("p1", axis=3, free=True, tokens=7), POLICY)
    assert flush is None and (after.page_ids, after.tokens, after.pending) == (ids(0, 1), 107, ())
    assert after.topic_sum == start.topic_sum  # it says nothing about the topic
    no_vector = SegmentBlock("p2", 5, False, (), T0)  # no embedder: nothing to judge the topic by
    assert no_vector.neutral and admit(after, no_vector, POLICY)[0].page_ids == ids(0, 1, 2)


def test_neutral_pages_after_a_pending_page_go_where_it_goes_and_do_not_count_as_lookahead() -> None:
    blocks = [*topics(4), blk("p4", axis=1, minute=4), blk("p5", axis=3, free=True, tokens=7, minute=5),
              blk("p6", axis=1, minute=6), blk("p7", axis=0, free=True, minute=7), blk("p8", axis=1, minute=8)]
    buffer, flushes = feed(blocks)
    assert not flushes and pending_ids(buffer) == ids(4, 5, 6, 7, 8)  # p4 has two pages with content after it
    buffer, flush = admit(buffer, blk("p9", axis=1, minute=9), POLICY)
    assert flush is not None and flush.page_ids == ids(0, 1, 2, 3)
    assert (buffer.topic_id, buffer.page_ids, pending_ids(buffer), buffer.tokens) == ("p4", ids(4, 5), ids(6, 7, 8, 9), 107)
    assert direction(buffer) == pytest.approx(blk("p4", axis=1).vector)


def test_neutral_pages_first_leave_the_topic_to_the_first_page_with_content() -> None:
    buffer, flushes = feed([blk("p0", axis=3, free=True), blk("p1", axis=1), blk("p2", axis=1)])
    assert not flushes and (buffer.topic_id, buffer.page_ids, pending_ids(buffer)) == ("p0", ids(0, 1), ids(2))
    assert direction(buffer) == pytest.approx(blk("p1", axis=1).vector)
    # a buffer of neutral pages only commits its first page with content at once
    buffer, _ = feed([blk("p0", free=True), blk("p1", free=True, axis=2)])
    assert buffer.topic_sum is None and admit(buffer, blk("p2", axis=1), POLICY)[0].page_ids == ids(0, 1, 2)


# -- another embedder ---------------------------------------------------------------------------------------------


def test_a_page_of_another_embedder_opens_a_topic_when_its_turn_comes() -> None:
    other = [SegmentBlock(f"q{i}", 10, False, (1.0, float(i)), T0 + timedelta(minutes=4 + i)) for i in range(W + 1)]
    buffer, flushes = feed([*topics(4), *other])
    assert [f.page_ids for f in flushes] == [ids(0, 1, 2, 3)]
    assert (buffer.topic_id, buffer.page_ids, buffer.topic_sum) == ("q0", ("q0",), (1.0, 0.0))


def test_pages_of_another_embedder_tell_nothing_about_the_page_before_them() -> None:
    # p4 is like the topic; what follows it cannot be compared with it: p4 joins, and q5 opens the next topic
    other = [SegmentBlock(f"q{i}", 10, False, (0.0, 1.0), T0 + timedelta(minutes=i)) for i in range(5, 5 + W + 1)]
    buffer, flushes = feed([*topics(5), *other])
    assert [f.page_ids for f in flushes] == [ids(0, 1, 2, 3, 4)] and buffer.topic_id == "q5"


# -- relay and split ------------------------------------------------------------------------------------------------


def test_relay_flushes_the_committed_pages_with_carry_and_keeps_the_topic() -> None:
    policy = SegmentationPolicy(max_processing_tokens=250)
    buffer, flushes = feed(topics(5), policy)  # p2 is decided when p5 comes
    assert not flushes and (buffer.page_ids, pending_ids(buffer)) == (ids(0, 1), ids(2, 3, 4))
    buffer, flush = admit(buffer, blk("p5", minute=5), policy)
    assert flush == Flush(ids(0, 1), FlushReason.RELAY, "p0", None, carry=True)
    assert (buffer.topic_id, buffer.page_ids, pending_ids(buffer), buffer.tokens) == ("p0", ids(2), ids(3, 4, 5), 100)
    assert buffer.topic_sum == pytest.approx(tuple(3 * x for x in blk("p0").vector))  # the topic's CL goes on

    headed = with_head_summary(buffer, "Built the snake game core.", 60)
    assert (headed.tokens, headed.head_tokens, headed.head_summary, headed.held_tokens) == (160, 60, "Built the snake game core.", 460)
    relayed, flush = admit(headed, blk("p6", minute=6), policy)
    assert flush == Flush(ids(2), FlushReason.RELAY, "p0", "Built the snake game core.", carry=True)
    assert relayed.page_ids == ids(3) and relayed.topic_id == "p0" and relayed.head_summary is None


def test_a_page_that_opens_a_topic_on_a_full_buffer_drifts_rather_than_relays() -> None:
    policy = SegmentationPolicy(max_processing_tokens=250)
    _, flushes = feed(topics(2, 4), policy)
    assert [(f.page_ids, f.reason, f.carry) for f in flushes] == [(ids(0, 1), FlushReason.DRIFT, False)]


def test_a_neutral_page_committed_on_its_own_can_relay() -> None:
    policy = SegmentationPolicy(max_processing_tokens=150)
    buffer, flushes = feed([blk("p0"), blk("p1", free=True)], policy)
    assert [(f.page_ids, f.reason) for f in flushes] == [(ids(0), FlushReason.RELAY)]
    assert (buffer.topic_id, buffer.page_ids) == ("p0", ids(1))


def test_a_page_larger_than_the_limit_still_starts_a_buffer() -> None:
    policy = SegmentationPolicy(max_processing_tokens=50)
    assert runs(topics(5), policy) == [ids(0), ids(1, 2, 3, 4)]  # the pending ones go with the /save flush


def test_a_container_cap_splits_a_topic_without_carrying_a_summary() -> None:
    policy = SegmentationPolicy(container_tokens=250)
    buffer, flushes = feed(topics(8), policy)
    assert flushes == [Flush(ids(0, 1), FlushReason.SPLIT, "p0", None, carry=False),
                       Flush(ids(2, 3), FlushReason.SPLIT, "p0", None, carry=False)]
    assert (buffer.page_ids, buffer.topic_id, pending_ids(buffer)) == (ids(4), "p0", ids(5, 6, 7))
    # the relay limit wins when both are passed, and a drift before either
    both = SegmentationPolicy(container_tokens=250, max_processing_tokens=250)
    assert [f.reason for f in feed(topics(6), both)[1]] == [FlushReason.RELAY]
    assert [f.reason for f in feed(topics(2, 4), policy)[1]] == [FlushReason.DRIFT]
    assert feed([blk("p0", tokens=900)], policy)[0].page_ids == ids(0)  # one page over the cap still starts a buffer


def test_with_head_summary_replaces_a_head_and_checks_tokens() -> None:
    buffer, _ = admit(Buffer(), blk("p0"), POLICY)
    once = with_head_summary(buffer, "first", 40)
    twice = with_head_summary(once, "second", 10)
    assert (twice.tokens, twice.head_tokens, twice.head_summary) == (110, 10, "second")
    with pytest.raises(ValueError):
        with_head_summary(buffer, "x", -1)


def test_a_pageless_relayed_buffer_commits_the_next_page_into_its_topic() -> None:
    buffer, _ = feed(topics(3))
    pageless, flush = flush_now(buffer, FlushReason.RELAY)
    assert flush is not None and flush.carry and flush.page_ids == ids(0, 1, 2)  # the pending pages joined the topic
    assert pageless.state is SegmentState.EMPTY and pageless.topic_id == "p0"
    assert pageless.topic_sum == pytest.approx(tuple(3 * x for x in blk("p0").vector))
    headed = with_head_summary(pageless, "so far", 30)
    same, nothing = admit(headed, blk("p3", axis=2), POLICY)  # nothing to flush before it: no topic to leave
    assert nothing is None and (same.topic_id, same.page_ids, same.head_summary, same.tokens) == ("p0", ids(3), "so far", 130)

    assert flush_now(headed) == (Buffer(), None)
    assert flush_now(headed, FlushReason.DRIFT) == (Buffer(), None)
    assert flush_if_idle(headed, T0 + timedelta(days=1), POLICY) == (headed, None)
    with pytest.raises(IllegalTransition):
        flush_now(headed, FlushReason.RELAY)


# -- idle and save ------------------------------------------------------------------------------------------------


def test_idle_flushes_committed_and_pending_pages_as_one_run_after_the_quiet_period_only() -> None:
    buffer, _ = feed([blk("p0", minute=0), blk("p1", minute=5), blk("p2", axis=2, minute=6)])
    assert (buffer.page_ids, pending_ids(buffer)) == (ids(0), ids(1, 2))
    assert flush_if_idle(buffer, T0 + timedelta(minutes=35), POLICY) == (buffer, None)
    fresh, flush = flush_if_idle(buffer, T0 + timedelta(minutes=36), POLICY)
    assert fresh == Buffer() and flush == Flush(ids(0, 1, 2), FlushReason.IDLE, "p0", None, carry=False)
    assert flush_if_idle(Buffer(), T0 + timedelta(days=9), POLICY) == (Buffer(), None)
    naive = (T0 + timedelta(minutes=36)).replace(tzinfo=None)
    assert flush_if_idle(buffer, naive, POLICY)[1] is not None


def test_a_page_after_an_idle_gap_flushes_everything_first() -> None:
    # the pages' own time decides, so the outcome does not depend on when the idle scheduler ran
    buffer, flushes = feed([blk("p0", minute=0), blk("p1", minute=29), blk("p2", axis=2, minute=59)])
    assert flushes == [Flush(ids(0, 1), FlushReason.IDLE, "p0", None, carry=False)]
    assert (buffer.topic_id, buffer.page_ids, buffer.pending) == ("p2", ids(2), ())
    # a neutral page goes with the page before it, but not across a quiet gap
    _, flushes = feed([blk("p0", minute=0), blk("p1", minute=31, free=True)])
    assert [f.reason for f in flushes] == [FlushReason.IDLE]


def test_save_flushes_everything_and_starts_fresh() -> None:
    buffer, _ = feed([blk("p0"), blk("p1", axis=3, free=True), blk("p2", axis=2)])
    headed = with_head_summary(buffer, "head", 5)
    fresh, flush = flush_now(headed)
    assert fresh == Buffer()
    assert flush == Flush(ids(0, 1, 2), FlushReason.SAVE, "p0", "head", carry=False)
    after, none = admit(fresh, blk("p3", axis=3), POLICY)
    assert none is None and after.topic_id == "p3"
    assert flush_now(Buffer()) == (Buffer(), None)


def test_out_of_order_timestamps_keep_last_at_the_latest() -> None:
    buffer, _ = feed([blk("p0", minute=10), blk("p1", minute=3), blk("p2", minute=4)])
    assert (buffer.started_at, buffer.last_at) == (T0 + timedelta(minutes=10), T0 + timedelta(minutes=10))


# -- the table and the values ---------------------------------------------------------------------------------------


def test_the_transition_table() -> None:
    assert next_segment_state(SegmentState.COLLECTING, SegmentEvent.RELAY).keep_topic
    assert next_segment_state(SegmentState.COLLECTING, SegmentEvent.SPLIT).keep_topic
    assert not next_segment_state(SegmentState.COLLECTING, SegmentEvent.DRIFT).keep_topic
    quiet = {SegmentEvent.BLOCK_COMMITTED, SegmentEvent.BLOCK_PENDING}
    assert all(step.flush == (state is SegmentState.COLLECTING and event not in quiet) for (state, event), step in TRANSITIONS.items())
    for event in (SegmentEvent.BLOCK_PENDING, SegmentEvent.RELAY, SegmentEvent.SPLIT):
        with pytest.raises(IllegalTransition) as caught:
            next_segment_state(SegmentState.EMPTY, event)
        assert "EMPTY" in str(caught.value) and event.name in str(caught.value)


@pytest.mark.parametrize("kwargs", [
    {"drift_margin": 2.5}, {"drift_overlap": -1.5}, {"lookahead": 0}, {"max_processing_tokens": 0},
    {"idle": timedelta(0)}, {"container_tokens": 0},
])
def test_policy_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SegmentationPolicy(**kwargs)  # type: ignore[arg-type]


def test_buffers_hold_their_invariants() -> None:
    with pytest.raises(ValueError):
        Buffer(tokens=5, head_tokens=6)
    with pytest.raises(ValueError):  # pending pages follow committed ones
        Buffer(topic_sum=(1.0,), pending=(blk("p0"),))
    with pytest.raises(ValueError):  # ... of a topic with a vector
        Buffer(page_ids=ids(0), tokens=100, pending=(blk("p1"),))
    with pytest.raises(ValueError):  # a neutral page never heads the window
        Buffer(page_ids=ids(0), tokens=100, topic_sum=(1.0, 0.0, 0.0, 0.0), pending=(blk("p1", free=True), blk("p2")))
    assert Buffer(page_ids=ids(0), tokens=100, topic_sum=(1.0, 0.0, 0.0, 0.0), pending=(blk("p1"), blk("p2", free=True))).pending


def test_blocks_validate_and_normalise() -> None:
    with pytest.raises(ValueError):
        SegmentBlock("p", -1, False, (1.0,), T0)
    block = SegmentBlock("p", 1, False, (3.0, 4.0), T0.replace(tzinfo=None))
    assert block.vector == (0.6, 0.8) and block.timestamp == T0 and not block.neutral
    assert SegmentBlock("p", 1, True, (1.0,), T0).neutral and SegmentBlock("p", 1, False, (), T0).neutral


def test_cosine_and_normalise() -> None:
    assert normalise([0.0, 0.0]) == (0.0, 0.0) and normalise([]) == ()
    assert cosine((1.0, 0.0), (0.0, 0.0)) == 0.0
    assert cosine((1.0, 1.0), (2.0, 2.0)) == pytest.approx(1.0) and cosine((1.0, 0.0), (-3.0, 0.0)) == -1.0
    with pytest.raises(ValueError):
        cosine((1.0,), (1.0, 0.0))


# -- properties -----------------------------------------------------------------------------------------------------


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, int, int, bool, int]]:
    actions = st.tuples(st.sampled_from(["block", "block", "block", "block", "idle", "save", "head"]),
                        st.integers(0, DIM - 1), st.integers(0, 400), st.booleans(), st.integers(0, 40))
    return draw(st.lists(actions, max_size=40))


@settings(max_examples=200, deadline=None)
@given(scripts(), st.integers(100, 1500), st.sampled_from([None, 300, 900]), st.integers(1, 4))
def test_every_page_lands_in_exactly_one_flush_or_the_buffer_in_order(
    script: list[tuple[str, int, int, bool, int]], limit: int, cap: int | None, lookahead: int,
) -> None:
    policy = SegmentationPolicy(max_processing_tokens=limit, container_tokens=cap, lookahead=lookahead)
    buffer, flushes, admitted, tokens = Buffer(), [], [], {}
    clock = T0
    for number, (action, axis, size, free, minutes) in enumerate(script):
        clock += timedelta(minutes=minutes)
        flush: Flush | None = None
        if action == "block":
            pid = f"p{number}"
            admitted.append(pid)
            tokens[pid] = size
            buffer, flush = admit(buffer, SegmentBlock(pid, size, free, unit(axis, 0.3), clock), policy)
            assert buffer.held_ids[-1] == pid
        elif action == "idle":
            buffer, flush = flush_if_idle(buffer, clock, policy)
        elif action == "save":
            buffer, flush = flush_now(buffer)
        else:
            buffer = with_head_summary(buffer, f"summary {number}", size // 4)
        if flush is not None:
            assert flush.page_ids and flush.carry == (flush.reason is FlushReason.RELAY)
            flushes.append(flush)
        assert buffer.tokens == sum(tokens[pid] for pid in buffer.page_ids) + buffer.head_tokens
        assert buffer.held_tokens == buffer.tokens + sum(tokens[b.page_id] for b in buffer.pending)
        if buffer.pending:  # what waits is undecided: its first page has fewer than W pages with content after it
            assert sum(not b.neutral for b in buffer.pending[1:]) < policy.lookahead
        assert (buffer.topic_id is None) == (buffer.state is SegmentState.EMPTY and buffer.topic_sum is None)
    landed = [pid for flush in flushes for pid in flush.page_ids] + list(buffer.held_ids)
    assert landed == admitted


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, DIM - 1), st.integers(W + 1, 8), st.lists(st.booleans(), min_size=8, max_size=8)),
                min_size=1, max_size=5))
def test_runs_of_distinct_topics_are_cut_where_each_begins(plan: list[tuple[int, int, list[bool]]]) -> None:
    # each run: W + 1 pages or more on one axis, some followed by a neutral page (which belongs to the run)
    plan = [run for i, run in enumerate(plan) if i == 0 or run[0] != plan[i - 1][0]]
    blocks: list[SegmentBlock] = []
    expected: list[tuple[str, ...]] = []
    for axis, length, neutral_after in plan:
        start = len(blocks)
        for i in range(length):
            blocks.append(blk(f"p{len(blocks)}", axis, minute=len(blocks)))
            if neutral_after[i]:
                blocks.append(blk(f"p{len(blocks)}", (axis + 1) % DIM, free=True, minute=len(blocks)))
        expected.append(tuple(b.page_id for b in blocks[start:]))
    assert runs(blocks) == expected
