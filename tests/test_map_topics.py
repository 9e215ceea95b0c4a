"""Which laid-open container's map entry a shown page gives back: its topic's, never a chapter's."""

from __future__ import annotations

from datetime import datetime, timezone

from gateway.adapters.manifests import Manifest
from gateway.core.pages import Page, PageType
from gateway.core.views import PageTree
from gateway.service.page_tree import open_folded
from gateway.service.view_choice import _topics

NOW = datetime(2026, 2, 14, 12, 0, tzinfo=timezone.utc)


def _manifest(page_id: str, sources: tuple[str, ...] = ()) -> Manifest:
    kind = PageType.CONSOLIDATED if sources else PageType.ORIGINAL
    return Manifest(Page(page_id, kind, NOW, "", "", (), 10, sources), summary_tokens=5, background_tokens=5, terms={}, length=0)


def test_a_page_of_a_topic_names_it_and_a_page_of_a_chapter_names_only_its_own_topic() -> None:
    # a chapter of two topics (a, b; c, d), then a topic of its own (e, f), then an exchange not yet in any
    chapter, t1, t2, t3, a, b, c, d, e, f, g = (f"{n:010x}" for n in range(11))
    children = {chapter: (t1, t2), t1: (a, b), t2: (c, d), t3: (e, f)}
    tree = PageTree((chapter, t3, g), children, frozenset(children))
    manifests = {i: _manifest(i, children.get(i, ())) for i in (*children, a, b, c, d, e, f, g)}
    flow, folded = open_folded(tree, {})
    assert folded == {chapter: (a, b, c, d), t3: (e, f)}
    assert _topics(folded, manifests, flow) == {e: t3, f: t3}
