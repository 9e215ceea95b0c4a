from __future__ import annotations

import dataclasses
import hashlib
from datetime import datetime, timedelta, timezone

import pytest

from gateway.core.blocks import split_blocks
from gateway.core.pages import Page, PageType, consolidated_page, is_page_id, original_page, page_id, utc

T0 = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)


def words(text: str) -> int:
    return len(text.split())


def test_page_id_is_a_stable_content_hash() -> None:
    assert page_id("hello") == "2cf24dba5f"  # sha256("hello"), the same on every machine
    assert page_id("hello") == hashlib.sha256(b"hello").hexdigest()[:10]
    assert page_id("hello", salt="x") != page_id("hello")
    assert is_page_id(page_id("lone \ud800 surrogate"))


@pytest.mark.parametrize(("text", "ok"), [("a1b2c3d4", True), ("a1b2c3d4e5f6", True), ("a1b2c3d", False),
                                          ("A1B2C3D4", False), ("a1b2c3d4e5f6a", False), ("zzzzzzzz", False)])
def test_is_page_id(text: str, ok: bool) -> None:
    assert is_page_id(text) is ok


def page(**changes: object) -> Page:
    fields: dict[str, object] = dict(
        id="a1b2c3d4e5", type=PageType.ORIGINAL, timestamp=T0, content="c", summary="s", clusters=("k",), tokens=1
    )
    fields.update(changes)
    return Page(**fields)  # type: ignore[arg-type]


def test_timestamps_are_aware_utc() -> None:
    assert page(timestamp=datetime(2026, 2, 14, 10, 30)).timestamp == T0
    plus_two = timezone(timedelta(hours=2))
    assert page(timestamp=datetime(2026, 2, 14, 12, 30, tzinfo=plus_two)).timestamp.tzinfo is timezone.utc
    assert utc(datetime(2026, 2, 14, 12, 30, tzinfo=plus_two)) == T0


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"id": "nothex!!"}, "hex"),
        ({"tokens": -1}, "tokens"),
        ({"source_ids": ("b1b2c3d4e5",)}, "Original"),
        ({"topic_id": "t"}, "Original"),
        ({"type": PageType.CONSOLIDATED}, "source id"),
        ({"type": PageType.CONSOLIDATED, "source_ids": ("a1b2c3d4e5",)}, "itself"),
    ],
)
def test_invalid_pages_are_rejected(changes: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        page(**changes)


def test_pages_are_immutable_and_manifest_can_be_replaced() -> None:
    p = page()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.summary = "x"  # type: ignore[misc]
    q = p.with_manifest("better", ["a", "b"])
    assert (q.id, q.content, q.summary, q.clusters) == (p.id, p.content, "better", ("a", "b"))


def test_original_page_from_a_block() -> None:
    messages = [{"role": "user", "content": "How do I configure Redis persistence?"},
                {"role": "assistant", "content": "Enable AOF with appendonly yes. RDB snapshots are the default."}]
    block = split_blocks(messages).blocks[0]
    p = original_page(block, T0, words)
    assert p.type is PageType.ORIGINAL
    assert p.id == page_id(block.text)
    assert p.content == block.text
    assert p.tokens == words(block.text)
    assert "How do I configure Redis persistence?" in p.summary
    assert "redis" in p.clusters
    assert original_page(block, T0, words) == p
    assert original_page(block, T0, words, salt="2").id != p.id
    given = original_page(block, T0, words, summary="S", clusters=["x"])
    assert (given.summary, given.clusters) == ("S", ("x",))


def test_consolidated_page() -> None:
    cp = consolidated_page("Redis setup account.", "Redis setup", ["a1b2c3d4e5", "b1b2c3d4e5"], T0, words,
                           topic_id="redis")
    assert cp.type is PageType.CONSOLIDATED
    assert cp.source_ids == ("a1b2c3d4e5", "b1b2c3d4e5")
    assert cp.id == page_id("Redis setup account.", "a1b2c3d4e5,b1b2c3d4e5")
    assert cp.topic_id == "redis"
    assert cp.tokens == 3
    assert "redis" in cp.clusters
    assert consolidated_page("x", "y", ["a1b2c3d4e5"], T0, words, clusters=["k"]).clusters == ("k",)
