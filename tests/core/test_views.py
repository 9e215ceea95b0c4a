from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.errors import IllegalTransition
from gateway.core.pages import Page, PageType
from gateway.core.views import (
    TRANSITIONS,
    PageTree,
    View,
    ViewState,
    ZoomEvent,
    consult,
    next_view,
    normalize,
    settle,
    shelve,
    view_of,
    visible_ids,
)

S, D, U = View.SUMMARY, View.DETAIL, View.UNPACKED
O1, O2, O3, O4, O5 = "a0000001", "a0000002", "a0000003", "a0000004", "a0000005"
C1, C2, C3 = "c0000001", "c0000002", "c0000003"
# O1, C1[O2, C2[O3, O4]], C3 (no children known), O5
TREE = PageTree((O1, C1, C3, O5), {C1: (O2, C2), C2: (O3, O4)}, frozenset({C1, C2, C3}))
EMPTY: ViewState = {}


def test_the_table_follows_the_spec() -> None:
    assert next_view(PageType.ORIGINAL, S, ZoomEvent.CONSULT) is D
    assert next_view(PageType.CONSOLIDATED, D, ZoomEvent.CONSULT) is U
    assert next_view(PageType.CONSOLIDATED, U, ZoomEvent.SHELVE) is D
    assert all(view is not U for (kind, _, _), view in TRANSITIONS.items() if kind is PageType.ORIGINAL)


@pytest.mark.parametrize(
    ("kind", "view", "event"),
    [(PageType.ORIGINAL, D, ZoomEvent.CONSULT), (PageType.ORIGINAL, S, ZoomEvent.SHELVE),
     (PageType.CONSOLIDATED, U, ZoomEvent.CONSULT), (PageType.ORIGINAL, U, ZoomEvent.SHELVE)],
)
def test_illegal_moves_raise_naming_state_and_event(kind: PageType, view: View, event: ZoomEvent) -> None:
    with pytest.raises(IllegalTransition) as caught:
        next_view(kind, view, event)
    assert view.value in str(caught.value) and event.value in str(caught.value)


def test_four_levels_and_back() -> None:
    r1 = consult(EMPTY, TREE, [C1])
    assert (dict(r1.state), r1.changed, r1.messages) == ({C1: D}, (C1,), (f"{C1}: Summary → Detail",))
    r2 = consult(r1.state, TREE, [C1])
    assert dict(r2.state) == {C1: U}
    assert "child pages are shown in Summary" in r2.messages[0]
    assert visible_ids(r2.state, TREE) == (O1, C1, O2, C2, C3, O5)
    r3 = consult(r2.state, TREE, [O2])
    assert dict(r3.state) == {C1: U, O2: D}
    r4 = shelve(r3.state, TREE, [O2])
    assert dict(r4.state) == {C1: D}
    assert r4.changed == (O2, C1)
    assert r4.messages == (f"{O2}: Detail → Summary; container {C1} folded back to Detail because none of its pages is open",)
    r5 = shelve(r4.state, TREE, [C1])
    assert dict(r5.state) == {}


def test_plain_language_for_impossible_moves() -> None:
    state = {O1: D, C1: U, C2: D}
    result = consult(state, TREE, [O1, C1, C3, "ffff0000", O1])
    assert result.messages == (
        f"{O1}: already in Detail, its whole text is shown; answer from it, no more tool calls",
        f"{C1}: already Unpacked; Consult one of its child pages instead: {O2}, {C2}",
        f"{C3}: Summary → Detail",
        "ffff0000: no page with this id is in the context",
    )
    assert consult(result.state, TREE, [C3]).messages == (
        f"{C3}: already in Detail; its child pages are not available, so there is nothing deeper to open",
    )
    folded = shelve(state, TREE, [O5, O3, "nope"])
    assert folded.messages == (
        f"{O5}: already in Summary; nothing to fold",
        f"{O3}: already folded inside {C2}, which is not unpacked; nothing to fold",
        "nope: no page with this id is in the context",
    )
    assert folded.changed == ()
    assert dict(folded.state) == state


def test_consulting_a_hidden_page_unpacks_its_path() -> None:
    result = consult(EMPTY, TREE, [O3])
    assert dict(result.state) == {C1: U, C2: U, O3: D}
    assert result.changed == (C1, C2, O3)
    assert result.messages == (f"{O3}: Summary → Detail (unpacked {C1}, {C2} to reach it)",)


def test_cascade_at_depth_goes_one_level() -> None:
    state = {C1: U, C2: U, O3: D}
    result = shelve(state, TREE, [O3])
    assert dict(result.state) == {C1: U, C2: D}
    again = shelve(result.state, TREE, [C2])
    assert dict(again.state) == {C1: D}
    assert again.changed == (C2, C1)


def test_shelving_a_container_folds_everything_inside() -> None:
    result = shelve({C1: U, C2: U, O3: D, O2: D}, TREE, [C1])
    assert dict(result.state) == {C1: D}
    assert set(result.changed) == {C1, C2, O3, O2}


def test_settle_folds_unpacked_containers_without_open_children() -> None:
    result = settle({C1: U, C2: U}, TREE)
    assert dict(result.state) == {C1: U, C2: D}
    assert result.messages == (f"{C2}: Unpacked → Detail because none of its child pages is open",)
    assert dict(settle({C1: U}, TREE).state) == {C1: D}


def test_normalize_repairs_a_persisted_state() -> None:
    stale = {O1: S, "gone0000": D, O3: D, C3: U, C1: D, O5: U}
    assert dict(normalize(stale, TREE)) == {C3: D, C1: D, O5: D}


def test_page_tree_validation_and_queries() -> None:
    with pytest.raises(ValueError, match="not a Consolidated"):
        PageTree((O1,), {O1: (O2,)}, frozenset())
    with pytest.raises(ValueError, match="twice"):
        PageTree((C1, C2), {C1: (C2,)}, frozenset({C1, C2}))
    with pytest.raises(ValueError, match="twice"):
        PageTree((C1,), {C1: (C2,), C2: (C1,)}, frozenset({C1, C2}))
    with pytest.raises(ValueError, match=f"page {O1} appears twice"):
        PageTree((O1, O2, O1), {}, frozenset())  # roots without children
    with pytest.raises(ValueError, match=f"page {O2} appears twice"):
        PageTree((C1, O2), {C1: (O2,)}, frozenset({C1}))  # a child listed as a root too
    assert TREE.ids() == (O1, C1, O2, C2, O3, O4, C3, O5)
    assert TREE.ancestors(O3) == (C1, C2)
    assert TREE.descendants(C1) == (O2, C2, O3, O4)
    assert TREE.parent(O1) is None and TREE.kind(C3) is PageType.CONSOLIDATED
    assert O4 in TREE and "x" not in TREE


def test_page_tree_from_pages() -> None:
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def page(pid: str, kind: PageType, sources: tuple[str, ...] = ()) -> Page:
        return Page(pid, kind, t, "c", "s", (), 1, sources)

    pages = [page(O2, PageType.ORIGINAL), page(C1, PageType.CONSOLIDATED, (O2, "a0000099")),
             page(C3, PageType.CONSOLIDATED, ("a0000098",))]
    tree = PageTree.from_pages(pages, [C1, C3])
    assert dict(tree.children) == {C1: (O2,)}
    assert tree.consolidated == {C1, C3}
    assert tree.ids() == (C1, O2, C3)


# --- properties -------------------------------------------------------------------------------------------------


@st.composite
def trees(draw: st.DrawFn) -> PageTree:
    count = draw(st.integers(min_value=1, max_value=12))
    ids = [f"{i:08x}" for i in range(count)]
    parents: list[int | None] = [None]
    for i in range(1, count):
        parents.append(draw(st.one_of(st.none(), st.integers(min_value=0, max_value=i - 1))))
    children: dict[str, list[str]] = {}
    for i, parent in enumerate(parents):
        if parent is not None:
            children.setdefault(ids[parent], []).append(ids[i])
    empty_containers = {ids[i] for i in range(count) if draw(st.booleans())}
    roots = tuple(ids[i] for i, parent in enumerate(parents) if parent is None)
    consolidated = frozenset(children) | empty_containers
    return PageTree(roots, {k: tuple(v) for k, v in children.items()}, consolidated)


def check_invariants(state: Mapping[str, View], tree: PageTree) -> None:
    for page, view in state.items():
        assert page in tree
        assert view is not S
        if view is U:
            assert tree.kind(page) is PageType.CONSOLIDATED and tree.kids(page)
        assert all(view_of(state, a) is U for a in tree.ancestors(page))


ops = st.lists(
    st.tuples(st.sampled_from(["consult", "shelve", "settle"]),
              st.lists(st.integers(min_value=0, max_value=13), max_size=4)),
    max_size=12,
)


@settings(max_examples=250, deadline=None)
@given(trees(), ops)
def test_any_sequence_keeps_every_invariant(tree: PageTree, sequence: list[tuple[str, list[int]]]) -> None:
    state: ViewState = {}
    for op, numbers in sequence:
        ids = [f"{n:08x}" for n in numbers]
        if op == "settle":
            result = settle(state, tree)
        else:
            result = (consult if op == "consult" else shelve)(state, tree, ids)
            assert len(result.messages) == len(dict.fromkeys(ids))
        check_invariants(result.state, tree)
        changed = {p for p in set(state) | set(result.state) if view_of(state, p) is not view_of(result.state, p)}
        assert set(result.changed) == changed and len(result.changed) == len(changed)
        if op == "shelve":
            for page in set(ids) & set(result.changed):
                parent = tree.parent(page)
                if parent is not None and view_of(result.state, parent) is U:
                    assert any(view_of(result.state, c) is not S for c in tree.kids(parent))
        if op == "settle":
            for page, view in result.state.items():
                if view is U:
                    assert any(view_of(result.state, c) is not S for c in tree.kids(page))
        state = result.state


def _consultable(state: ViewState, tree: PageTree, page: str) -> bool:
    view = view_of(state, page)
    if tree.kind(page) is PageType.ORIGINAL:
        return view is S
    return view is S or (view is D and bool(tree.kids(page)))


@settings(max_examples=250, deadline=None)
@given(trees(), ops, st.data())
def test_shelve_right_after_consult_restores_the_views(
    tree: PageTree, sequence: list[tuple[str, list[int]]], data: st.DataObject
) -> None:
    state: ViewState = {}
    for op, numbers in sequence:
        ids = [f"{n:08x}" for n in numbers]
        state = (consult if op == "consult" else shelve)(state, tree, ids).state
    state = settle(state, tree).state
    candidates = [p for p in visible_ids(state, tree) if _consultable(state, tree, p)]
    chosen = data.draw(st.lists(st.sampled_from(candidates), unique=True) if candidates else st.just([]))
    opened = consult(state, tree, chosen)
    assert set(chosen) <= set(opened.changed)
    assert dict(shelve(opened.state, tree, chosen).state) == dict(state)


def test_a_tree_grown_by_leaves_is_the_tree_built_with_them() -> None:
    tree = PageTree(("a", "c"), {"c": ("d", "e")}, frozenset({"c"}))
    grown = tree.grown(["f", "g"])
    built = PageTree(("a", "c", "f", "g"), {"c": ("d", "e")}, frozenset({"c"}))
    assert grown == built and grown.ids() == built.ids() and grown.parent("g") is None and grown.parent("d") == "c"
    assert "f" not in tree  # the tree it grew from is as it was
    with pytest.raises(ValueError, match="twice"):
        tree.grown(["d"])
    with pytest.raises(ValueError, match="Consolidated"):
        PageTree(("a",), {}, frozenset({"c"})).grown(["c"])
