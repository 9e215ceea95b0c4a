"""The segmentation buffer as the consolidation store keeps it: written and read back unchanged, and buffers
written before the pending window (an EMA kernel and a suspect) still read."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from gateway.adapters.consolidation_store import buffer_json, parse_buffer
from gateway.core.segmentation import Buffer, SegmentationPolicy, SegmentBlock, admit, flush_now, normalise, with_head_summary

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
POLICY = SegmentationPolicy()


def block(pid: str, axis: int, minute: int, *, free: bool = False, tokens: int = 100) -> SegmentBlock:
    vector = [0.1] * 4
    vector[axis] = 1.0
    return SegmentBlock(pid, tokens, free, tuple(vector), T0 + timedelta(minutes=minute))


def fed(blocks: list[SegmentBlock], policy: SegmentationPolicy = POLICY) -> list[Buffer]:
    """Every buffer along the way."""
    buffers, buffer = [Buffer()], Buffer()
    for b in blocks:
        buffer, _ = admit(buffer, b, policy)
        buffers.append(buffer)
    return buffers


def test_every_buffer_reads_back_as_written() -> None:
    blocks = [block(f"p{i}", i // 5, i, free=i % 4 == 2) for i in range(14)]
    buffers = fed(blocks) + fed(blocks, SegmentationPolicy(max_processing_tokens=250))
    buffers.append(with_head_summary(buffers[-1], "the story so far ✓", 12))
    buffers.append(flush_now(buffers[-1])[0])
    assert any(b.pending for b in buffers) and any(b.pending and any(p.neutral for p in b.pending) for b in buffers)
    for buffer in buffers:
        assert parse_buffer(buffer_json(buffer)) == buffer
    assert parse_buffer(None) == Buffer() and parse_buffer("") == Buffer()


def test_a_buffer_read_back_decides_as_the_one_kept_in_memory() -> None:
    blocks = [block(f"p{i}", i // 6, i) for i in range(18)]
    kept, stored = Buffer(), Buffer()
    for b in blocks:
        kept, flush = admit(kept, b, POLICY)
        stored, again = admit(parse_buffer(buffer_json(stored)), b, POLICY)
        assert again == flush
    assert stored == kept


def old_buffer(**changes: object) -> str:
    kernel = normalise([1.0, 0.1, 0.1, 0.1])
    data = {
        "topic_id": "p0", "page_ids": ["p0", "p1", "p2", "p3", "p4"], "tokens": 420, "kernel": list(kernel),
        "head_summary": "head", "head_tokens": 20, "started_at": T0.isoformat(),
        "last_at": (T0 + timedelta(minutes=4)).isoformat(),
        "suspect": {"at": 3, "vector": [0.0, 1.0, 0.0, 0.0], "tokens": 107, "started_at": (T0 + timedelta(minutes=3)).isoformat()},
    } | changes  # fmt: skip
    return json.dumps(data)


def test_a_buffer_written_with_a_suspect_reads_with_the_suspect_pending() -> None:
    buffer = parse_buffer(old_buffer())
    assert (buffer.topic_id, buffer.page_ids, buffer.tokens, buffer.head_summary, buffer.head_tokens) == ("p0", ("p0", "p1", "p2"), 313, "head", 20)
    assert [(b.page_id, b.tokens, b.neutral) for b in buffer.pending] == [("p3", 107, False), ("p4", 0, True)]
    assert buffer.pending[0].vector == (0.0, 1.0, 0.0, 0.0) and buffer.held_tokens == 420
    assert buffer.topic_sum is not None and buffer.topic_sum == pytest.approx([3 * x for x in normalise([1.0, 0.1, 0.1, 0.1])])
    assert buffer.last_at == T0 + timedelta(minutes=4)
    # the lookahead decides the old suspect: it opened a topic here
    after = buffer
    flushes = []
    for i in range(5, 8):
        after, flush = admit(after, block(f"p{i}", 1, i), POLICY)
        flushes += [flush] if flush else []
    assert [f.page_ids for f in flushes] == [("p0", "p1", "p2")] and after.topic_id == "p3"
    assert parse_buffer(buffer_json(buffer)) == buffer  # and it is written in the new form


def test_older_buffers_without_a_suspect_or_a_kernel_still_read() -> None:
    no_suspect = parse_buffer(old_buffer(suspect=None))
    assert no_suspect.page_ids == ("p0", "p1", "p2", "p3", "p4") and no_suspect.tokens == 420 and not no_suspect.pending
    assert no_suspect.topic_sum == pytest.approx([5 * x for x in normalise([1.0, 0.1, 0.1, 0.1])])
    before_suspects = json.loads(old_buffer())
    del before_suspects["suspect"], before_suspects["head_tokens"]
    before_suspects["head_summary"] = None
    assert parse_buffer(json.dumps(before_suspects)).tokens == 420
    pageless = parse_buffer(old_buffer(page_ids=[], tokens=20, suspect=None, started_at=None, last_at=None))
    assert pageless.topic_sum == pytest.approx(normalise([1.0, 0.1, 0.1, 0.1]))  # a relayed topic keeps its direction
    assert parse_buffer(old_buffer(kernel=None, suspect=None)).topic_sum is None
