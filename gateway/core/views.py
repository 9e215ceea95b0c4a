"""Views and zoom: the Summary / Detail / Unpacked state of each page and the Consult / Shelve moves (PCP §VI).

The legal moves are the table :data:`TRANSITIONS` keyed by (page type, view, event); :func:`next_view` applies
it and raises :class:`IllegalTransition` for anything else. :func:`consult` and :func:`shelve` apply a model's
call to any number of ids and turn every impossible move into a plain-language line instead of an exception.

A *view state* is an immutable mapping page id → :class:`View`; an absent id is in Summary. The pages in the
context form a :class:`PageTree`: top-level ``roots`` and, for Consolidated pages, their children, any depth.

Invariants of every state returned here:

1. only known ids, and never an explicit Summary entry;
2. Unpacked only for Consolidated pages that have children;
3. a page above Summary is visible: each of its ancestors is Unpacked;
4. after a Shelve, an Unpacked container with no child above Summary has collapsed to Detail (cascade).

An Unpacked container whose children are all in Summary exists only as the direct result of a Consult on it
(zoom level 3, so the model can choose a child). :func:`settle` folds such containers back to Detail; the gateway
calls it when a turn ends, which restores the rule "Unpacked needs an open child" for the next turn.

Consulting a page hidden inside a container unpacks the containers on its path first.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from gateway.core.errors import IllegalTransition
from gateway.core.pages import Page, PageType

__all__ = [
    "TRANSITIONS",
    "PageTree",
    "View",
    "ViewState",
    "ZoomEvent",
    "ZoomResult",
    "consult",
    "next_view",
    "normalize",
    "settle",
    "shelve",
    "view_of",
    "visible_ids",
]


class View(enum.Enum):
    SUMMARY = "Summary"
    DETAIL = "Detail"
    UNPACKED = "Unpacked"


class ZoomEvent(enum.Enum):
    CONSULT = "Consult"
    SHELVE = "Shelve"


_O, _C = PageType.ORIGINAL, PageType.CONSOLIDATED
TRANSITIONS: Mapping[tuple[PageType, View, ZoomEvent], View] = {
    (_O, View.SUMMARY, ZoomEvent.CONSULT): View.DETAIL,
    (_O, View.DETAIL, ZoomEvent.SHELVE): View.SUMMARY,
    (_C, View.SUMMARY, ZoomEvent.CONSULT): View.DETAIL,
    (_C, View.DETAIL, ZoomEvent.CONSULT): View.UNPACKED,
    (_C, View.DETAIL, ZoomEvent.SHELVE): View.SUMMARY,
    (_C, View.UNPACKED, ZoomEvent.SHELVE): View.DETAIL,
}

ViewState = Mapping[str, View]


def next_view(kind: PageType, view: View, event: ZoomEvent) -> View:
    """The view after ``event``; raises :class:`IllegalTransition` naming the state and the event."""
    try:
        return TRANSITIONS[(kind, view, event)]
    except KeyError:
        raise IllegalTransition("zoom", f"{kind.value} page in {view.value}", event.value) from None


@dataclass(frozen=True)
class PageTree:
    """The pages of one context: top-level ``roots`` (in any order) and ``children`` of Consolidated pages.

    Only ids reachable from ``roots`` are in the context. Raises ``ValueError`` when a page would appear twice
    (a cycle, or two parents) or when a page with children is not listed in ``consolidated``.
    """

    roots: tuple[str, ...]
    children: Mapping[str, tuple[str, ...]]
    consolidated: frozenset[str]
    _parents: Mapping[str, str | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        children = MappingProxyType({key: tuple(value) for key, value in self.children.items()})
        object.__setattr__(self, "roots", tuple(self.roots))
        object.__setattr__(self, "children", children)
        object.__setattr__(self, "consolidated", frozenset(self.consolidated))
        for container in children:
            if container not in self.consolidated:
                raise ValueError(f"page {container} has children but is not a Consolidated page")
        parents: dict[str, str | None] = {}
        for root in self.roots:  # depth first, root by root: a root without children is the common case
            if root not in children:
                if root in parents:
                    raise ValueError(f"page {root} appears twice in the page tree")
                parents[root] = None
                continue
            if root in parents:
                raise ValueError(f"page {root} appears twice in the page tree")
            parents[root] = None
            # preorder: each container's children in order, a child container's subtree before its next sibling
            stack: list[tuple[str, Iterator[str]]] = [(root, iter(children[root]))]
            while stack:
                container, kids = stack[-1]
                for child in kids:
                    if child in parents:
                        raise ValueError(f"page {child} appears twice in the page tree")
                    parents[child] = container
                    if child in children:
                        stack.append((child, iter(children[child])))
                        break
                else:
                    stack.pop()
        object.__setattr__(self, "_parents", MappingProxyType(parents))

    @classmethod
    def from_pages(cls, pages: Iterable[Page], roots: Sequence[str]) -> PageTree:
        """The tree of ``roots`` over ``pages``; a child id whose page is not given is left out."""
        by_id = {page.id: page for page in pages}
        children = {
            page.id: tuple(source for source in page.source_ids if source in by_id)
            for page in by_id.values()
            if page.type is PageType.CONSOLIDATED
        }
        consolidated = frozenset(children)
        return cls(tuple(roots), {key: value for key, value in children.items() if value}, consolidated)

    def grown(self, leaves: Sequence[str]) -> PageTree:
        """This tree with ``leaves`` (Original pages, none of them in it) added as its last roots: the tree
        ``PageTree(roots + leaves, children, consolidated)`` is, without walking again the pages it already has
        (a chat's next request adds an exchange or two to a tree of thousands)."""
        parents: dict[str, str | None] = self._parents.copy()  # type: ignore[attr-defined]  # (a MappingProxyType: the dict's own copy)
        for leaf in leaves:
            if leaf in parents:
                raise ValueError(f"page {leaf} appears twice in the page tree")
            if leaf in self.consolidated:
                raise ValueError(f"page {leaf} is a Consolidated page, not a leaf")
            parents[leaf] = None
        tree = object.__new__(PageTree)
        object.__setattr__(tree, "roots", self.roots + tuple(leaves))
        object.__setattr__(tree, "children", self.children)
        object.__setattr__(tree, "consolidated", self.consolidated)
        object.__setattr__(tree, "_parents", MappingProxyType(parents))
        return tree

    def __contains__(self, page_id: object) -> bool:
        return page_id in self._parents

    def ids(self) -> tuple[str, ...]:
        """Every page id in the context, depth first in child order."""
        return tuple(self._parents)

    def is_root(self, page_id: str) -> bool:
        """Whether ``page_id`` is one of the top-level pages (found by its parent, not in ``roots``)."""
        return page_id in self._parents and self._parents[page_id] is None

    def kind(self, page_id: str) -> PageType:
        return PageType.CONSOLIDATED if page_id in self.consolidated else PageType.ORIGINAL

    def parent(self, page_id: str) -> str | None:
        return self._parents.get(page_id)

    def kids(self, page_id: str) -> tuple[str, ...]:
        return self.children.get(page_id, ())

    def ancestors(self, page_id: str) -> tuple[str, ...]:
        """The containers above ``page_id``, outermost first."""
        chain: list[str] = []
        parent = self.parent(page_id)
        while parent is not None:
            chain.append(parent)
            parent = self.parent(parent)
        return tuple(reversed(chain))

    def descendants(self, page_id: str) -> tuple[str, ...]:
        found: list[str] = []
        stack = list(reversed(self.kids(page_id)))
        while stack:
            page = stack.pop()
            found.append(page)
            stack.extend(reversed(self.kids(page)))
        return tuple(found)


@dataclass(frozen=True)
class ZoomResult:
    """The outcome of one Consult / Shelve / settle.

    ``state``: the new view state. ``changed``: ids whose view differs from before (cascades included), in the
    order they were first touched. ``messages``: one plain-language line per requested id, for the model.
    """

    state: ViewState
    changed: tuple[str, ...]
    messages: tuple[str, ...]


def view_of(state: ViewState, page_id: str) -> View:
    return state.get(page_id, View.SUMMARY)


def _visible(state: ViewState, tree: PageTree, page_id: str) -> bool:
    return all(view_of(state, a) is View.UNPACKED for a in tree.ancestors(page_id))


def visible_ids(state: ViewState, tree: PageTree) -> tuple[str, ...]:
    """The ids the model can see: the roots and, recursively, the children of Unpacked containers."""
    return tuple(page for page in tree.ids() if _visible(state, tree, page))


def normalize(state: ViewState, tree: PageTree) -> ViewState:
    """``state`` made valid for ``tree``: unknown ids, Summary entries and hidden open pages are dropped, and
    Unpacked on a page that cannot be unpacked becomes Detail. Use it on a persisted state before reuse."""
    clean: dict[str, View] = {}
    if not any(page in tree for page in state):  # the usual case: nothing opened; no walk over every page
        return MappingProxyType(clean)
    for page in tree.ids():
        if page not in state:
            continue  # in Summary
        view = state[page]
        if view is View.UNPACKED and not (tree.kind(page) is PageType.CONSOLIDATED and tree.kids(page)):
            view = View.DETAIL
        if view is not View.SUMMARY and all(clean.get(a) is View.UNPACKED for a in tree.ancestors(page)):
            clean[page] = view
    return MappingProxyType(clean)


class _Zoom:
    """The working copy behind one call: a mutable dict, the touch order and the result lines."""

    def __init__(self, state: ViewState, tree: PageTree) -> None:
        self.before = normalize(state, tree)
        self.tree = tree
        self.views = dict(self.before)
        self.touched: list[str] = []
        self.messages: list[str] = []

    def get(self, page_id: str) -> View:
        return self.views.get(page_id, View.SUMMARY)

    def set(self, page_id: str, view: View) -> None:
        self.touched.append(page_id)
        if view is View.SUMMARY:
            self.views.pop(page_id, None)
        else:
            self.views[page_id] = view

    def step(self, page_id: str, event: ZoomEvent) -> tuple[View, View]:
        before = self.get(page_id)
        after = next_view(self.tree.kind(page_id), before, event)
        self.set(page_id, after)
        return before, after

    def result(self) -> ZoomResult:
        changed = dict.fromkeys(p for p in self.touched if self.before.get(p) != self.views.get(p))
        return ZoomResult(MappingProxyType(dict(self.views)), tuple(changed), tuple(self.messages))


def _unknown(page_id: str) -> str:
    return f"{page_id}: no page with this id is in the context"


def _consult_one(zoom: _Zoom, page_id: str) -> str:
    tree = zoom.tree
    opened = []
    for ancestor in tree.ancestors(page_id):
        while zoom.get(ancestor) is not View.UNPACKED:
            zoom.step(ancestor, ZoomEvent.CONSULT)
            if ancestor not in opened:
                opened.append(ancestor)
    note = f" (unpacked {', '.join(opened)} to reach it)" if opened else ""
    view, kind = zoom.get(page_id), tree.kind(page_id)
    if kind is PageType.CONSOLIDATED and view is View.DETAIL and not tree.kids(page_id):
        return f"{page_id}: already in Detail; its child pages are not available, so there is nothing deeper to open"
    try:
        before, after = zoom.step(page_id, ZoomEvent.CONSULT)
    except IllegalTransition:
        if kind is PageType.ORIGINAL:
            return f"{page_id}: already in Detail, its whole text is shown; answer from it, no more tool calls"
        return f"{page_id}: already Unpacked; Consult one of its child pages instead: {', '.join(tree.kids(page_id))}"
    if after is View.UNPACKED:
        return f"{page_id}: Detail → Unpacked; its child pages are shown in Summary, Consult one to read it"
    return f"{page_id}: {before.value} → {after.value}{note}"


def _shelve_one(zoom: _Zoom, page_id: str) -> str:
    tree = zoom.tree
    if zoom.get(page_id) is View.SUMMARY:
        hidden = next((a for a in tree.ancestors(page_id) if zoom.get(a) is not View.UNPACKED), None)
        if hidden is not None:
            return f"{page_id}: already folded inside {hidden}, which is not unpacked; nothing to fold"
        return f"{page_id}: already in Summary; nothing to fold"
    before, after = zoom.step(page_id, ZoomEvent.SHELVE)
    if before is View.UNPACKED:
        for child in tree.descendants(page_id):
            if zoom.get(child) is not View.SUMMARY:
                zoom.set(child, View.SUMMARY)
    line = f"{page_id}: {before.value} → {after.value}"
    parent = tree.parent(page_id)
    # One level is enough: a collapsed container is in Detail, which still counts as open for its own parent.
    if parent is not None and zoom.get(parent) is View.UNPACKED:
        if all(zoom.get(child) is View.SUMMARY for child in tree.kids(parent)):
            zoom.step(parent, ZoomEvent.SHELVE)
            line += f"; container {parent} folded back to Detail because none of its pages is open"
    return line


def _apply(state: ViewState, tree: PageTree, ids: Iterable[str], event: ZoomEvent) -> ZoomResult:
    zoom = _Zoom(state, tree)
    for page_id in dict.fromkeys(ids):
        if page_id not in tree:
            zoom.messages.append(_unknown(page_id))
        elif event is ZoomEvent.CONSULT:
            zoom.messages.append(_consult_one(zoom, page_id))
        else:
            zoom.messages.append(_shelve_one(zoom, page_id))
    return zoom.result()


def consult(state: ViewState, tree: PageTree, ids: Iterable[str]) -> ZoomResult:
    """Open each id one level deeper (Summary → Detail, Consolidated Detail → Unpacked), in order, duplicates
    ignored. Hidden pages are reached by unpacking their containers. Never raises for a model's mistake."""
    return _apply(state, tree, ids, ZoomEvent.CONSULT)


def shelve(state: ViewState, tree: PageTree, ids: Iterable[str]) -> ZoomResult:
    """Fold each id one level back (Unpacked → Detail, which also folds everything inside it; Detail → Summary),
    in order, duplicates ignored, with the container cascade of invariant 4. Never raises for a model's mistake."""
    return _apply(state, tree, ids, ZoomEvent.SHELVE)


def settle(state: ViewState, tree: PageTree) -> ZoomResult:
    """Fold every Unpacked container with no child above Summary back to Detail (end of a turn)."""
    zoom = _Zoom(state, tree)
    if View.UNPACKED not in zoom.views.values():  # the usual case: no container open, no walk over every page
        return zoom.result()
    for page_id in reversed(tree.ids()):
        if zoom.get(page_id) is View.UNPACKED and all(zoom.get(c) is View.SUMMARY for c in tree.kids(page_id)):
            zoom.step(page_id, ZoomEvent.SHELVE)
            zoom.messages.append(f"{page_id}: Unpacked → Detail because none of its child pages is open")
    return zoom.result()
