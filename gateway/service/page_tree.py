"""Which of a thread's pages a request shows at the top level, and the containers the budget lays open.

`visible_tree`: the pages covering a request's history, a consolidated page standing for its children when
all of them belong to this request (pages of other branches never show). `open_folded`: that tree with each
container the model has not opened laid open, so the router and the budget work on single exchanges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from typing import Any, TypeVar

from gateway.adapters.manifests import Manifest
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.core import PageTree, PageType, ViewState

__all__ = ["grown_from", "kept", "open_folded", "open_folded_kept", "visible_tree"]

T = TypeVar("T")


async def visible_tree(
    store: ThreadSnapshot, pool: Sequence[str], history: AbstractSet[str], recent: frozenset[str] = frozenset()
) -> tuple[PageTree, Mapping[str, Manifest]]:
    """The top-level pages covering `pool`: a consolidated page stands for its children when every
    original page under it belongs to this request's history (pages of other branches never show), the recent
    turns shown verbatim (``recent``) included: the tree leaves those out of its container (they are not in the
    pool), and a topic that holds some stands for the others only inside a chapter. Pages
    and links are read through the request's snapshot of the thread (from Redis only where the process's
    cache does not have them). The result is kept with the thread's version for the same pool and history
    when every page of the pool is stored (a page stored later changes no stored page or link, so the version
    stays, but it would join the tree). The manifests are the kept ones, not a copy (read only: a request's pages
    are its every page, and a copy of them would be a pass over the thread)."""
    key = ("visible_tree", tuple(pool), frozenset(history), recent)
    kept: tuple[PageTree, dict[str, Manifest]] | None = store.derived.get(key)
    if kept is not None:
        return kept
    grown = await _grown_tree(store, key)
    if grown is not None:
        return grown
    manifests = await store.manifests(pool)
    roots = [page for page in pool if page in manifests]
    complete = len(roots) == len(pool)
    covered: dict[str, bool] = {}

    def covers(page: str) -> bool:
        """Whether every original page under ``page`` is of this history (each container judged once: a chapter's
        answer is its children's)."""
        if page in history:  # an exchange of this request's history (`history` holds no container)
            return True
        known = covered.get(page)
        if known is None:
            manifest = manifests.get(page)
            known = manifest is not None and manifest.page.type is not PageType.ORIGINAL and all(map(covers, manifest.page.source_ids))
            covered[page] = known
        return known

    while True:
        parents = await store.parents(roots)
        wanted = sorted({p for p in parents.values() if p not in manifests})
        manifests.update(await store.manifests(wanted))
        lifted: dict[str, None] = {}
        changed = False
        for page in roots:
            parent = parents.get(page)
            if parent in manifests and covers(parent):
                lifted[parent] = None
                changed = True
            else:
                lifted[page] = None
        contained = {child for page in lifted for child in manifests[page].page.source_ids}
        roots = [page for page in lifted if page not in contained]
        if not changed:
            break
    # A topic that holds recent turns stands for its exchanges inside a chapter only: on top, its own line would
    # repeat the turns shown verbatim, so its other exchanges are the pages.
    holding = {page for page in roots if not recent.isdisjoint(manifests[page].page.source_ids)}
    if holding:
        roots = [kid for page in roots for kid in ([k for k in manifests[page].page.source_ids if k in manifests] if page in holding else [page])]
    pages = [m.page for i, m in manifests.items() if i not in holding]
    tree = PageTree.from_pages(pages, roots)
    if complete:
        store.derived[key] = (tree, manifests)
        if not holding:
            _remember(store, key)
    return tree, manifests


GROWN_FROM = 4  # the trees of a thread's version a request's tree may grow from: its last requests' (two budgets)


def _remember(store: ThreadSnapshot, key: tuple[str, tuple[str, ...], frozenset[str], frozenset[str]]) -> None:
    """Keep ``key`` (a complete tree's, no topic holding recent turns) among the ones the next request's tree may
    grow from."""
    last: list[Any] = store.derived.pop("visible_trees", [])  # (put back as the newest: the oldest values go first)
    store.derived["visible_trees"] = [key, *(k for k in last if k != key)][:GROWN_FROM]


async def _grown_tree(store: ThreadSnapshot, key: tuple[Any, ...]) -> tuple[PageTree, dict[str, Manifest]] | None:
    """The tree of ``key``'s pool as a kept tree of an earlier request with the new pages added at its end, when
    that is what the walk of :func:`visible_tree` would give: a chat's next request, whose pool is the last one's
    and an exchange or two more. It is when the earlier pool is a prefix of this one, its history a subset of this
    one's, and none of the pages this request adds to the pool, to the history or to the recent turns is in a
    container (no parent): then no container covers more than it did, none holds a recent turn, and the new pages
    are top-level pages after the others. Pages and links change only with the thread's version, and what is kept
    is the version's (``store.derived``). ``None``: walk the tree."""
    _, pool, history, recent = key
    for earlier in store.derived.get("visible_trees", ()):
        _, before, seen, was_recent = earlier
        kept = store.derived.get(earlier)
        if kept is None or len(before) >= len(pool) or pool[: len(before)] != before or not seen <= history:
            continue
        added = pool[len(before) :]
        new = [*added, *(history - seen), *(recent - was_recent)]
        manifests = await store.manifests(added)
        if len(manifests) < len(added) or any(manifests[p].page.type is not PageType.ORIGINAL for p in added):
            return None
        if await store.parents(new):
            return None
        tree = kept[0].grown(added)
        manifests = {**kept[1], **manifests}
        store.derived[key] = (tree, manifests)
        store.derived[("grown", id(tree))] = (tree, kept[0], added)
        _remember(store, key)
        return tree, manifests
    return None


def grown_from(store: ThreadSnapshot, tree: PageTree) -> tuple[PageTree, tuple[str, ...]] | None:
    """The kept tree ``tree`` grew from (:func:`visible_tree`, :func:`open_folded_kept`) and the top-level pages
    it added at the end, if it did."""
    found = store.derived.get(("grown", id(tree)))
    return (found[1], found[2]) if found is not None and found[0] is tree else None


def open_folded(tree: PageTree, state: ViewState) -> tuple[PageTree, dict[str, tuple[str, ...]]]:
    """What the budget arranges: ``tree`` with each top-level container the model has not opened laid open.
    Its Original pages become top-level pages in their own right, next to the container itself, which stays as
    a page without children (its summary; its consolidated account in Detail). Returns that tree and each
    laid-open container's pages.

    A question about one exchange of an old topic then gets that exchange, as a line or in Detail, instead of
    the whole topic or only its summary: the router scores the pages, not the container. The model's zoom
    still works on ``tree``: consulting such a page opens its container on the way, as for any hidden page."""
    roots: list[str] = []
    children = dict(tree.children)
    folded: dict[str, tuple[str, ...]] = {}
    for root in tree.roots:
        if tree.kids(root) and root not in state:
            inside = tree.descendants(root)
            folded[root] = tuple(page for page in inside if tree.kind(page) is PageType.ORIGINAL)
            for container in (root, *inside):
                children.pop(container, None)
            roots.extend(folded[root])
        roots.append(root)
    return PageTree(tuple(roots), children, tree.consolidated), folded


def open_folded_kept(store: ThreadSnapshot, tree: PageTree, state: ViewState) -> tuple[PageTree, dict[str, tuple[str, ...]]]:
    """:func:`open_folded`, kept with the thread's version for the same tree (the very object, which
    :func:`visible_tree` keeps for the same pool) and views."""
    views = frozenset(state.items())
    key = ("open_folded", id(tree), views)
    kept = store.derived.get(key)
    if kept is not None and kept[0] is tree:  # the tree is held by the value: its id is no other's
        return kept[1], dict(kept[2])
    lineage = grown_from(store, tree)
    before = store.derived.get(("open_folded", id(lineage[0]), views)) if lineage is not None else None
    if lineage is not None and before is not None and before[0] is lineage[0]:
        # the pages added at the end have no children: laid open or not, the flow adds them at its end
        flow, folded = before[1].grown(lineage[1]), before[2]
        store.derived[("grown", id(flow))] = (flow, before[1], lineage[1])
    else:
        flow, folded = open_folded(tree, state)
    store.derived[key] = (tree, flow, dict(folded))
    return flow, dict(folded)


def kept(
    snapshot: ThreadSnapshot, name: str, tree: PageTree, compute: Callable[[], T], grow: Callable[[T, tuple[str, ...]], T] | None = None
) -> T:
    """``compute()``, kept with the thread's version for the same tree (the very object, which `visible_tree` and
    `open_folded_kept` keep): what a request derives from all of the tree's pages is not derived again. With
    ``grow``, a tree that grew from a kept one (`grown_from`) has its value as ``grow(that tree's value, the pages
    added at its end)``, when that tree's is kept: ``grow`` must give what ``compute`` would."""
    key = (name, id(tree))
    found = snapshot.derived.get(key)
    if found is not None and found[0] is tree:
        value: T = found[1]
        return value
    lineage = grown_from(snapshot, tree) if grow is not None else None
    before = snapshot.derived.get((name, id(lineage[0]))) if lineage is not None else None
    if grow is not None and lineage is not None and before is not None and before[0] is lineage[0]:
        value = grow(before[1], lineage[1])
    else:
        value = compute()
    snapshot.derived[key] = (tree, value)
    return value
