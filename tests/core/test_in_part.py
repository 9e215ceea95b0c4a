"""A page too large for its room, opened in part: what the node shows and what the tool result lists."""

from __future__ import annotations

from datetime import datetime, timezone

from gateway.core.in_part import container_in_part, exchange_in_part
from gateway.core.pages import Page, PageType

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)
TOPIC = "cccccccc03"


def _kids(subjects: list[str]) -> list[Page]:
    return [
        Page(f"{i:08d}a{i % 10}", PageType.ORIGINAL, NOW, f"user: about {s}\nassistant: {s} " * 20, f"{s}. " * 15, (), 200)
        for i, s in enumerate(subjects)
    ]


def _topic(kids: list[Page]) -> Page:
    return Page(TOPIC, PageType.CONSOLIDATED, NOW, "all of it", "a topic", (), 9000, tuple(k.id for k in kids))


def test_the_best_matching_children_are_shown_in_conversation_order_as_many_as_fit() -> None:
    kids = _kids(["garden water", "kayak paddle carbon", "garden soil", "kayak roll", "garden frost"])
    shown, listed, cost = container_in_part(_topic(kids), kids, 1200, len, "the kayak paddle\nits roll")
    assert shown == (kids[1].id, kids[3].id)  # the two about the kayak, in the order they were said
    assert cost <= 1200 and len(listed) == 1
    assert all(f"[{k.id}] {k.summary[:10]}" in listed[0] for k in (kids[0], kids[2], kids[4]))  # the others' leads
    # room for every child: all are nodes, nothing is listed
    shown, listed, _ = container_in_part(_topic(kids), kids, 10**6, len, "kayak")
    assert shown == tuple(k.id for k in kids) and listed == []


def test_without_room_one_child_is_shown_and_the_others_are_listed_by_id_alone() -> None:
    kids = _kids(["garden water", "kayak paddle carbon", "garden soil"])
    shown, listed, _ = container_in_part(_topic(kids), kids, 0, len, "kayak")
    assert shown == (kids[1].id,) and listed[0].endswith(f"[{kids[0].id}]\n[{kids[2].id}]")


def test_an_exchange_is_opened_in_part_only_when_an_excerpt_is_smaller() -> None:
    log = "\n".join(f"line {i}: nothing to report" for i in range(200))
    page = Page("aaaaaaaa01", PageType.ORIGINAL, NOW, f"user: the deploy hangs\n{log}\nline 200: ERROR disk full\nassistant: Clear it.", "s", (), 3000)
    found = exchange_in_part(page, 600, len, "which error?")
    assert found is not None and "ERROR disk full" in found[0] and "…" in found[0] and found[1] <= 600
    one_line = Page("bbbbbbbb02", PageType.ORIGINAL, NOW, "user: " + "x" * 5000, "s", (), 1500)  # a single unit: nothing to cut
    assert exchange_in_part(one_line, 600, len, "x") is None
