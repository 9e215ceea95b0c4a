from __future__ import annotations

import math
from dataclasses import replace
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
    Suspect,
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
DIM = 4


def unit(axis: int, wobble: float = 0.0) -> tuple[float, ...]:
    vector = [wobble] * DIM
    vector[axis] = 1.0
    return tuple(vector)


def blk(pid: str, axis: int = 0, *, tokens: int = 100, free: bool = False, minute: int = 0,
        wobble: float = 0.1) -> SegmentBlock:
    return SegmentBlock(pid, tokens, free, unit(axis, wobble), T0 + timedelta(minutes=minute))


def feed(blocks: list[SegmentBlock], policy: SegmentationPolicy = POLICY,
         buffer: Buffer | None = None) -> tuple[Buffer, list[Flush]]:
    current, flushes = buffer or Buffer(), []
    for block in blocks:
        current, flush = admit(current, block, policy)
        if flush is not None:
            flushes.append(flush)
    return current, flushes


def is_unit(vector: tuple[float, ...] | None) -> bool:
    return vector is not None and math.isclose(math.fsum(x * x for x in vector), 1.0)


def test_three_topics_give_two_drift_flushes_and_a_buffer() -> None:
    blocks = [blk(f"p{i}", axis=i // 3, minute=i) for i in range(9)]
    buffer, flushes = feed(blocks)
    assert [f.page_ids for f in flushes] == [("p0", "p1", "p2"), ("p3", "p4", "p5")]
    assert [f.topic_id for f in flushes] == ["p0", "p3"]
    assert all(f.reason is FlushReason.DRIFT and not f.carry and f.head_summary is None for f in flushes)
    assert (buffer.page_ids, buffer.topic_id, buffer.tokens) == (("p6", "p7", "p8"), "p6", 300)
    assert (buffer.started_at, buffer.last_at) == (T0 + timedelta(minutes=6), T0 + timedelta(minutes=8))
    assert buffer.kernel is not None and cosine(buffer.kernel, unit(2)) > 0.9 and is_unit(buffer.kernel)
    assert buffer.suspect is None


def test_a_block_off_the_topic_waits_as_a_suspect_and_the_next_block_confirms_the_drift() -> None:
    buffer, flushes = feed([blk("p0"), blk("p1"), blk("p2", axis=1, minute=2)])
    assert not flushes and buffer.page_ids == ("p0", "p1", "p2") and buffer.suspect is not None
    assert buffer.suspect.at == 2 and buffer.kernel == pytest.approx(blk("p0").vector)  # not moved
    # content-free blocks follow the suspect wherever it goes
    buffer, flushes = feed([blk("p3", axis=3, free=True, tokens=7, minute=3), blk("p4", axis=1, minute=4)], buffer=buffer)
    assert flushes == [Flush(("p0", "p1"), FlushReason.DRIFT, "p0", None, carry=False)]
    assert (buffer.page_ids, buffer.topic_id, buffer.tokens, buffer.suspect) == (("p2", "p3", "p4"), "p2", 207, None)
    assert (buffer.started_at, buffer.last_at) == (T0 + timedelta(minutes=2), T0 + timedelta(minutes=4))
    assert buffer.kernel == pytest.approx(blk("p2", axis=1).vector) and is_unit(buffer.kernel)


def test_a_lone_outlier_stays_in_the_topic_and_leaves_the_kernel() -> None:
    buffer, flushes = feed([blk("p0"), blk("p1", axis=2), blk("p2"), blk("p3")])
    assert not flushes and buffer.page_ids == ("p0", "p1", "p2", "p3") and buffer.suspect is None
    assert buffer.kernel == pytest.approx(blk("p0").vector)
    # a drift confirmed right after an outlier was cleared puts the boundary at the new suspect
    buffer, flushes = feed([blk("p4", axis=1), blk("p5", axis=1)], buffer=buffer)
    assert [f.page_ids for f in flushes] == [("p0", "p1", "p2", "p3")] and buffer.page_ids == ("p4", "p5")


def test_a_suspect_closer_to_the_topic_than_to_the_next_block_stays_and_that_block_waits() -> None:
    leaning = SegmentBlock("p1", 100, False, (0.2, 1.0, 0.0, 0.0), T0)  # off the topic, but less than p2
    buffer, flushes = feed([blk("p0"), leaning, blk("p2", axis=2)])
    assert not flushes and buffer.suspect is not None and buffer.suspect.at == 2
    buffer, flushes = feed([blk("p3", axis=2)], buffer=buffer)
    assert [f.page_ids for f in flushes] == [("p0", "p1")] and buffer.page_ids == ("p2", "p3")


def test_flushes_that_are_not_drifts_take_a_pending_suspect_with_them() -> None:
    buffer, _ = feed([blk("p0"), blk("p1", axis=2, minute=1)])
    assert flush_now(buffer)[1] == Flush(("p0", "p1"), FlushReason.SAVE, "p0", None, carry=False)
    assert flush_if_idle(buffer, T0 + timedelta(hours=1), POLICY)[1] == Flush(("p0", "p1"), FlushReason.IDLE, "p0", None, carry=False)
    headed = with_head_summary(buffer, "head", 20)
    assert headed.suspect == buffer.suspect and headed.tokens == 220
    after, flush = admit(headed, blk("p2", axis=2, minute=2), POLICY)
    assert flush == Flush(("p0",), FlushReason.DRIFT, "p0", "head", carry=False)
    assert (after.page_ids, after.tokens, after.head_summary) == (("p1", "p2"), 200, None)


def test_a_suspect_that_would_overflow_the_buffer_drifts_at_once() -> None:
    for policy in (SegmentationPolicy(max_processing_tokens=250), SegmentationPolicy(container_tokens=250)):
        buffer, flushes = feed([blk("p0"), blk("p1"), blk("p2", axis=2)], policy)
        assert [(f.page_ids, f.reason) for f in flushes] == [(("p0", "p1"), FlushReason.DRIFT)]
        assert buffer.page_ids == ("p2",) and buffer.suspect is None


def test_a_suspect_meeting_a_block_of_another_embedder_gives_that_block_the_kernel() -> None:
    buffer, _ = feed([blk("p0"), blk("p1", axis=2)])
    after, flush = admit(buffer, SegmentBlock("p2", 10, False, (0.0, 1.0), T0), POLICY)
    assert flush is not None and flush.page_ids == ("p0",) and after.kernel == (0.0, 1.0)


def test_first_block_opens_the_topic_with_its_anchor_as_kernel() -> None:
    buffer, flush = admit(Buffer(), blk("p0", axis=1, wobble=0.0), POLICY)
    assert flush is None and buffer.state is SegmentState.COLLECTING
    assert (buffer.topic_id, buffer.kernel, buffer.tokens) == ("p0", unit(1), 100)


def test_adsorption_moves_the_kernel_toward_the_block() -> None:
    policy = SegmentationPolicy(adsorb_threshold=0.5)
    start, _ = admit(Buffer(), blk("p0", axis=0, wobble=0.0), policy)
    leaning = SegmentBlock("p1", 10, False, (1.0, 1.0, 0.0, 0.0), T0)
    moved, flush = admit(start, leaning, policy)
    assert flush is None and moved.page_ids == ("p0", "p1") and moved.kernel is not None
    assert 0 < moved.kernel[1] < moved.kernel[0] and is_unit(moved.kernel)


def test_a_content_free_block_never_drifts_and_leaves_the_kernel() -> None:
    start, _ = admit(Buffer(), blk("p0", axis=0), POLICY)
    after, flush = admit(start, blk("p1", axis=3, free=True), POLICY)
    assert flush is None and after.page_ids == ("p0", "p1") and after.kernel == start.kernel
    no_vector = SegmentBlock("p2", 5, False, (), T0)  # no embedder: nothing to judge the topic by
    assert admit(after, no_vector, POLICY) == (replace(after, page_ids=("p0", "p1", "p2"), tokens=205), None)


def test_content_free_blocks_first_leave_the_kernel_to_the_first_block_with_content() -> None:
    buffer, flushes = feed([blk("p0", axis=3, free=True), blk("p1", axis=1), blk("p2", axis=1)])
    assert not flushes and buffer.topic_id == "p0" and buffer.page_ids == ("p0", "p1", "p2")
    assert buffer.kernel is not None and cosine(buffer.kernel, blk("p1", axis=1).vector) > 0.999


def test_relay_flushes_with_carry_and_keeps_the_topic() -> None:
    policy = SegmentationPolicy(max_processing_tokens=250)
    buffer, flushes = feed([blk("p0"), blk("p1"), blk("p2")], policy)
    assert flushes == [Flush(("p0", "p1"), FlushReason.RELAY, "p0", None, carry=True)]
    assert (buffer.page_ids, buffer.topic_id, buffer.tokens, buffer.head_summary) == (("p2",), "p0", 100, None)
    assert buffer.kernel == pytest.approx(blk("p2").vector)

    headed = with_head_summary(buffer, "Built the snake game core.", 60)
    assert (headed.tokens, headed.head_tokens, headed.head_summary) == (160, 60, "Built the snake game core.")
    relayed, flush = admit(headed, blk("p3"), policy)
    assert flush == Flush(("p2",), FlushReason.RELAY, "p0", "Built the snake game core.", carry=True)
    assert relayed.page_ids == ("p3",) and relayed.topic_id == "p0" and relayed.head_summary is None


def test_a_drifting_block_on_a_full_buffer_drifts_rather_than_relays() -> None:
    policy = SegmentationPolicy(max_processing_tokens=250)
    buffer, flushes = feed([blk("p0"), blk("p1"), blk("p2", axis=2)], policy)
    assert [(f.reason, f.carry) for f in flushes] == [(FlushReason.DRIFT, False)]
    assert buffer.topic_id == "p2" and buffer.page_ids == ("p2",)


def test_a_block_larger_than_the_limit_still_starts_a_buffer() -> None:
    policy = SegmentationPolicy(max_processing_tokens=50)
    buffer, flushes = feed([blk("p0"), blk("p1")], policy)
    assert [f.page_ids for f in flushes] == [("p0",)] and buffer.page_ids == ("p1",)


def test_with_head_summary_replaces_a_head_and_checks_tokens() -> None:
    buffer, _ = admit(Buffer(), blk("p0"), POLICY)
    once = with_head_summary(buffer, "first", 40)
    twice = with_head_summary(once, "second", 10)
    assert (twice.tokens, twice.head_tokens, twice.head_summary) == (110, 10, "second")
    with pytest.raises(ValueError):
        with_head_summary(buffer, "x", -1)


def test_a_pageless_relayed_buffer_adsorbs_or_drops_its_topic_without_flushing() -> None:
    buffer, _ = feed([blk("p0"), blk("p1")])
    pageless, flush = flush_now(buffer, FlushReason.RELAY)
    assert flush is not None and flush.carry and flush.page_ids == ("p0", "p1")
    assert pageless.state is SegmentState.EMPTY and pageless.topic_id == "p0" and pageless.kernel == buffer.kernel
    headed = with_head_summary(pageless, "so far", 30)

    same, nothing = admit(headed, blk("p2", wobble=0.2), POLICY)
    assert nothing is None and (same.topic_id, same.head_summary, same.tokens) == ("p0", "so far", 130)
    assert same.kernel != headed.kernel and is_unit(same.kernel)

    other, nothing = admit(headed, blk("p3", axis=2), POLICY)
    assert nothing is None and other.head_summary is None
    assert (other.topic_id, other.page_ids, other.tokens) == ("p3", ("p3",), 100)

    assert flush_now(headed) == (Buffer(), None)
    assert flush_if_idle(headed, T0 + timedelta(days=1), POLICY) == (headed, None)
    with pytest.raises(IllegalTransition):
        flush_now(headed, FlushReason.RELAY)


def test_a_kernel_of_another_dimension_is_a_drift() -> None:
    buffer, _ = admit(Buffer(), blk("p0"), POLICY)
    after, flush = admit(buffer, SegmentBlock("p1", 10, False, (1.0, 0.0), T0), POLICY)
    assert flush is not None and flush.reason is FlushReason.DRIFT and after.kernel == (1.0, 0.0)


def test_idle_flush_after_the_quiet_period_only() -> None:
    buffer, _ = feed([blk("p0", minute=0), blk("p1", minute=5)])
    assert flush_if_idle(buffer, T0 + timedelta(minutes=34), POLICY) == (buffer, None)
    fresh, flush = flush_if_idle(buffer, T0 + timedelta(minutes=35), POLICY)
    assert fresh == Buffer() and flush == Flush(("p0", "p1"), FlushReason.IDLE, "p0", None, carry=False)
    assert flush_if_idle(Buffer(), T0 + timedelta(days=9), POLICY) == (Buffer(), None)
    naive = (T0 + timedelta(minutes=35)).replace(tzinfo=None)
    assert flush_if_idle(buffer, naive, POLICY)[1] is not None


def test_a_block_after_an_idle_gap_flushes_the_buffer_first() -> None:
    # the pages' own time decides, so the outcome does not depend on when the idle scheduler ran
    buffer, flushes = feed([blk("p0", minute=0), blk("p1", minute=29), blk("p2", minute=59)])
    assert flushes == [Flush(("p0", "p1"), FlushReason.IDLE, "p0", None, carry=False)]
    assert buffer.page_ids == ("p2",) and buffer.topic_id == "p2"
    # a content-free block is adsorbed unconditionally, but not across a quiet gap
    _, flushes = feed([blk("p0", minute=0), blk("p1", minute=31, free=True)])
    assert [f.reason for f in flushes] == [FlushReason.IDLE]


def test_a_container_cap_splits_a_topic_without_carrying_a_summary() -> None:
    policy = SegmentationPolicy(container_tokens=250)
    buffer, flushes = feed([blk(f"p{i}", minute=i) for i in range(5)], policy)
    assert flushes == [Flush(("p0", "p1"), FlushReason.SPLIT, "p0", None, carry=False),
                       Flush(("p2", "p3"), FlushReason.SPLIT, "p0", None, carry=False)]
    assert buffer.page_ids == ("p4",) and buffer.topic_id == "p0" and buffer.kernel is not None
    # the relay limit still wins when it is the smaller one, and a drift before either
    relaying = SegmentationPolicy(container_tokens=1_000, max_processing_tokens=250)
    assert [f.reason for f in feed([blk(f"p{i}", minute=i) for i in range(3)], relaying)[1]] == [FlushReason.RELAY]
    assert [f.reason for f in feed([blk("p0"), blk("p1"), blk("p2", axis=2)], policy)[1]] == [FlushReason.DRIFT]
    assert feed([blk("p0", tokens=900)], policy)[0].page_ids == ("p0",)  # one page over the cap still starts a buffer


def test_save_flushes_everything_and_starts_fresh() -> None:
    buffer, _ = feed([blk("p0"), blk("p1", axis=3, free=True)])
    headed = with_head_summary(buffer, "head", 5)
    fresh, flush = flush_now(headed)
    assert fresh == Buffer()
    assert flush == Flush(("p0", "p1"), FlushReason.SAVE, "p0", "head", carry=False)
    after, none = admit(fresh, blk("p2", axis=3), POLICY)
    assert none is None and after.topic_id == "p2"
    assert flush_now(Buffer()) == (Buffer(), None)


def test_out_of_order_timestamps_keep_last_at_the_latest() -> None:
    buffer, _ = feed([blk("p0", minute=10), blk("p1", minute=3)])
    assert (buffer.started_at, buffer.last_at) == (T0 + timedelta(minutes=10), T0 + timedelta(minutes=10))


def test_the_transition_table() -> None:
    assert next_segment_state(SegmentState.COLLECTING, SegmentEvent.RELAY).keep_topic
    assert next_segment_state(SegmentState.COLLECTING, SegmentEvent.SPLIT).keep_topic
    assert not next_segment_state(SegmentState.COLLECTING, SegmentEvent.DRIFT).keep_topic
    assert all(step.flush == (state is SegmentState.COLLECTING and event is not SegmentEvent.BLOCK_ADSORBED)
               for (state, event), step in TRANSITIONS.items())
    with pytest.raises(IllegalTransition) as caught:
        next_segment_state(SegmentState.EMPTY, SegmentEvent.RELAY)
    assert "EMPTY" in str(caught.value) and "RELAY" in str(caught.value)


@pytest.mark.parametrize("kwargs", [
    {"adsorb_threshold": 1.5}, {"max_processing_tokens": 0},
    {"kernel_weight": 0.0}, {"kernel_weight": 1.1}, {"idle": timedelta(0)}, {"container_tokens": 0},
])
def test_policy_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SegmentationPolicy(**kwargs)  # type: ignore[arg-type]


def test_values_validate_and_normalise() -> None:
    with pytest.raises(ValueError):
        Buffer(tokens=5, head_tokens=6)
    with pytest.raises(ValueError):
        SegmentBlock("p", -1, False, (1.0,), T0)
    block = SegmentBlock("p", 1, False, (3.0, 4.0), T0.replace(tzinfo=None))
    assert block.vector == (0.6, 0.8) and block.timestamp == T0
    for at, tokens in ((0, 1), (1, 1), (0, 5), (1, 3)):
        with pytest.raises(ValueError):
            Buffer(page_ids=("a",) if at == 1 and tokens == 1 else ("a", "b"), tokens=2,
                   suspect=Suspect(at, (1.0,), tokens, T0))
    assert Buffer(page_ids=("a", "b"), tokens=2, suspect=Suspect(1, (1.0,), 1, T0)).suspect is not None


def test_cosine_and_normalise() -> None:
    assert normalise([0.0, 0.0]) == (0.0, 0.0) and normalise([]) == ()
    assert cosine((1.0, 0.0), (0.0, 0.0)) == 0.0
    assert cosine((1.0, 1.0), (2.0, 2.0)) == pytest.approx(1.0) and cosine((1.0, 0.0), (-3.0, 0.0)) == -1.0
    with pytest.raises(ValueError):
        cosine((1.0,), (1.0, 0.0))


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, int, int, bool, int]]:
    actions = st.tuples(st.sampled_from(["block", "block", "block", "idle", "save", "head"]),
                        st.integers(0, DIM - 1), st.integers(0, 400), st.booleans(), st.integers(0, 90))
    return draw(st.lists(actions, max_size=40))


@settings(max_examples=200, deadline=None)
@given(scripts(), st.integers(100, 1500), st.floats(0.0, 1.0))
def test_every_page_lands_in_exactly_one_flush_or_the_buffer_in_order(
    script: list[tuple[str, int, int, bool, int]], limit: int, threshold: float,
) -> None:
    policy = SegmentationPolicy(adsorb_threshold=threshold, max_processing_tokens=limit)
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
            assert buffer.page_ids[-1] == pid
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
        assert buffer.kernel is None or is_unit(buffer.kernel)
        if buffer.suspect is not None:  # what waits as a new topic is the buffer's tail
            tail = buffer.page_ids[buffer.suspect.at :]
            assert buffer.suspect.tokens == sum(tokens[pid] for pid in tail)
        assert (buffer.topic_id is None) == (buffer.state is SegmentState.EMPTY and buffer.kernel is None)
    landed = [pid for flush in flushes for pid in flush.page_ids] + list(buffer.page_ids)
    assert landed == admitted
