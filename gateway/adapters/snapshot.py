"""What one request reads of a thread: the state `RedisStore.snapshot` reads in one atomic round trip (its version,
layout, views, trace, last accesses and page count), and the manifests and parents of the request's pages, kept in
what this process knows of the thread at that version (`gateway.adapters.thread_cache.KnownPages`).

A snapshot sends no Redis command itself: pages asked for later are read through a `PageReader`, the store's public
surface for it, so the key layout and the store's errors stay in `gateway.adapters.redis_store`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from gateway.adapters.manifests import Manifest, NewPage, manifest_json
from gateway.adapters.postings import Postings
from gateway.adapters.store_keys import ThreadKey
from gateway.adapters.thread_cache import KnownPages
from gateway.core import Step, View
from gateway.core.labels import side_names

__all__ = ["PageReader", "ThreadSnapshot"]

DERIVED_KEPT = 32  # values a thread's version keeps for the request path (ThreadSnapshot.derived): a few requests'
# (a request derives ~10 from its trees; the last requests' are what the next one extends: gateway.service.page_tree)


class PageReader(Protocol):
    """What a snapshot reads through (`RedisStore`)."""

    def parsed_manifest(self, thread: ThreadKey, page_id: str, raw: str) -> Manifest:
        """The manifest stored as ``raw``, parsed once per process while that JSON is unchanged."""

    async def manifests_and_parents(self, thread: ThreadKey, ids: list[str]) -> tuple[list[str | None], list[str | None]]:
        """The stored manifest (its JSON) and parent of each of ``ids``, read atomically."""


class ThreadSnapshot:
    """What one request reads of a thread, in one atomic round trip (`RedisStore.snapshot`): its version, the
    request's pages' manifests and parents (from the process's cache where it holds them), its layout, views,
    trace, last accesses and page count. Pages asked for later (containers) are read when first needed."""

    def __init__(
        self, reader: PageReader, thread: ThreadKey, known: KnownPages, *, layout: str | None, views: dict[str, View],
        steps: tuple[Step, ...], page_count: int, paged: bool, asked: tuple[str, float] | None, seen: Mapping[str, str],
        wanted: Sequence[str], manifests: Sequence[str | None], parents: Sequence[str | None],
    ) -> None:
        """``manifests`` and ``parents``: the stored ones of the pages ``wanted``, read with the rest."""
        self._reader = reader
        self.thread = thread
        self._known = known
        self._absent: set[str] = set()
        self.layout = layout
        self.views = views
        self.steps = steps
        self.page_count = page_count
        self.paged = paged
        self.asked = asked
        self._seen = seen
        self._fill(wanted, manifests, parents)

    def _fill(self, ids: Sequence[str], manifests: Sequence[str | None], parents: Sequence[str | None]) -> None:
        known, reader, thread = self._known, self._reader, self.thread
        for page_id, raw, parent in zip(ids, manifests, parents):
            if raw is None:
                self._absent.add(page_id)
                continue
            known.read(page_id, reader.parsed_manifest(thread, page_id, raw), parent)
            self._absent.discard(page_id)

    def _unread(self, ids: Sequence[str]) -> list[str]:
        known = self._known
        return list(dict.fromkeys(i for i in ids if i not in known.manifests and i not in self._absent))

    async def manifests(self, ids: Sequence[str]) -> dict[str, Manifest]:
        """Manifests of the stored pages among ``ids`` (read from Redis only for pages this process does not know)."""
        unread = self._unread(ids)
        if unread:
            manifests, parents = await self._reader.manifests_and_parents(self.thread, unread)
            self._fill(unread, manifests, parents)
        known = self._known.manifests
        return {i: known[i] for i in ids if i in known}

    async def parents(self, ids: Sequence[str]) -> dict[str, str]:
        """The containing consolidated page of each stored page among ``ids`` that has one."""
        await self.manifests(ids)
        parents = self._known.parents
        return {i: parent for i in ids if (parent := parents.get(i)) is not None}

    def missing(self, ids: Sequence[str]) -> list[str]:
        """The ids (in order) with no stored page, among those this snapshot read."""
        return [i for i in ids if i in self._absent] if self._absent else []

    def stored(self, pages: Iterable[NewPage], added: Iterable[str]) -> None:
        """Pages this request tried to store, and the ids it did store: those are known as stored and read back,
        with no parent yet; the others (another process stored them first) are read when asked for."""
        mine = set(added)
        for new in pages:
            if new.page.id in mine:
                self._fill([new.page.id], [manifest_json(new)], [None])
            else:
                self._absent.discard(new.page.id)

    @property
    def derived(self) -> dict[Hashable, Any]:
        """What the request path derives from this version's pages and links, for the next request to reuse
        (nothing in it can go stale: the version changes with any stored page or link; a key must name
        everything else the value depends on). Bounded: past DERIVED_KEPT values the oldest quarter goes (the
        last requests' are what the next one grows from)."""
        derived = self._known.derived
        if len(derived) > DERIVED_KEPT:
            for key in list(derived)[: DERIVED_KEPT // 4]:
                del derived[key]
        return derived

    @property
    def postings(self) -> Postings:
        """The term counts of the pages this process knows of the thread, by term (see gateway.adapters.postings)."""
        return self._known.postings

    def side_names(self, more: Iterable[Iterable[tuple[str, str]]] = ()) -> dict[str, str]:
        """The names of the two sides of a chat between two people replayed as user and assistant, role to name,
        learnt from how each calls the other in the pages this process knows (`gateway.core.labels.side_names`),
        and in the pages about to be stored (``more``: each one's calls, `Manifest.called`); empty when they are
        not both known."""
        known = self._known
        pages = list(more)
        if pages:
            return side_names(known.called + Counter(pair for page in pages for pair in page), len(known.manifests) + len(pages))
        # decided once per version and pages read (the counts change only with them), not on every request
        key = ("side_names", len(known.manifests))
        names = self.derived.get(key)
        if names is None:
            names = self.derived[key] = side_names(known.called, len(known.manifests)) if known.called else {}
        return dict(names)

    @property
    def user_postings(self) -> Postings:
        """The same for the user's own messages (see `Manifest.own_terms`): built from the known pages when a
        question about the user first asks for it, then kept up to date as pages are read."""
        return self._known.own_postings()

    def last_seen(self, ids: Sequence[str], among: Callable[[str], bool] | None = None) -> dict[str, datetime]:
        """When the model last saw each of ``ids`` it has seen; ``among`` tells whether a page is one of them, where
        the caller can say so without a set of them all."""
        seen = self._seen
        if len(seen) < len(ids):  # the few pages ever opened are walked, not every page of the thread
            wanted = among if among is not None else set(ids).__contains__
            return {i: datetime.fromisoformat(at) for i, at in seen.items() if wanted(i)}
        return {i: datetime.fromisoformat(seen[i]) for i in ids if i in seen}
