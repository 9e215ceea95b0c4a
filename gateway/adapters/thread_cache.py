"""What one gateway process keeps of the threads it reads from the store: parsed manifests, and per thread the
manifests, parent links and term postings read at its current version (gateway.adapters.redis_store reads the
version first, atomically with what it reads of the thread, so a kept record is never stale)."""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable
from typing import Any

from gateway.adapters.manifests import Manifest, parse_manifest
from gateway.adapters.postings import Postings
from gateway.core.lru import Lru

__all__ = ["KnownPages", "ManifestCache", "PageCache"]


class ManifestCache:
    """Parsed manifests by (thread, page id), reused while the stored JSON is unchanged.

    Parsing every manifest of a long thread on every request costs more than fetching them; a manifest
    changes only when the consolidator rewrites its summary, and the JSON's length and hash catch that (the JSON
    itself is not kept: ~3.5 KB a page beside its parsed manifest, 55-74 MB of a process at 10,000 exchanges; the
    hash is Python's, 64 bits keyed per process, ~1 µs a manifest).
    """

    def __init__(self, capacity: int = 200_000) -> None:
        self._items: Lru[tuple[str, str], tuple[tuple[int, int], Manifest]] = Lru(capacity)

    def get(self, scope: str, page_id: str, raw: str) -> Manifest:
        key, seen = (scope, page_id), (len(raw), hash(raw))
        cached = self._items.get(key)
        if cached is not None and cached[0] == seen:
            return cached[1]
        manifest = parse_manifest(page_id, raw)
        self._items.put(key, (seen, manifest))
        return manifest


class KnownPages:
    """What one process knows of a thread's stored pages at one version: manifests by page id (a page absent
    here is looked up), and each looked-up page's parent (``None``: it has none); and, across versions, the term
    counts of every page it read (a page's counts never change: what changes a version is a new container, a parent
    link, a summary rewritten, the thread deleted and stored anew; a page the thread no longer has is never among a
    request's documents)."""

    def __init__(self, version: str | None, earlier: KnownPages | None = None) -> None:
        self.version = version
        self.manifests: dict[str, Manifest] = {}
        self.parents: dict[str, str | None] = {}
        self.called: Counter[tuple[str, str]] = Counter()  # the manifests' (role, name) calls, in how many pages each
        self.derived: dict[Hashable, Any] = {}  # see ThreadSnapshot.derived
        self.complete_for: tuple[str, ...] = ()  # ids a request found all known here (manifests only grow within a version)
        # the manifests' term counts by term, the same for the user's own messages (once asked for), and the manifest
        # each page's counts were taken from: kept from the thread's earlier version, whose pages are mostly this one's
        self.postings: Postings = earlier.postings if earlier is not None else Postings()
        self.user_postings: Postings | None = earlier.user_postings if earlier is not None else None
        self._indexed: dict[str, Manifest] = earlier._indexed if earlier is not None else {}

    def read(self, page_id: str, manifest: Manifest, parent: str | None) -> None:
        """A page's manifest and parent as this version has them (its term counts indexed unless they are)."""
        if page_id not in self.manifests and manifest.called:
            self.called.update(manifest.called)
        self.manifests[page_id] = manifest
        self.parents[page_id] = parent
        indexed = self._indexed.get(page_id)
        if indexed is manifest:
            return
        if indexed is not None and indexed.terms == manifest.terms and indexed.own_terms == manifest.own_terms:
            self._indexed[page_id] = manifest  # a manifest rewritten (its summary): its counts are the ones indexed
            return
        if indexed is not None:  # counts that differ from those indexed (nothing writes such): indexed again from this version's
            self.postings, self.user_postings, self._indexed = Postings(), None, {}
            for known, counted in self.manifests.items():
                self._indexed[known] = counted
                self.postings.add(known, counted.terms)
            return
        self._indexed[page_id] = manifest
        self.postings.add(page_id, manifest.terms)
        if self.user_postings is not None:
            self.user_postings.add(page_id, manifest.own_terms)

    def own_postings(self) -> Postings:
        """The term counts of the user's own messages (see `Manifest.own_terms`), indexed when first asked for."""
        if self.user_postings is None:
            self.user_postings = Postings()
            for page_id, manifest in self._indexed.items():
                self.user_postings.add(page_id, manifest.own_terms)
        return self.user_postings


class PageCache:
    """Per thread, the manifests and parent links read at the thread's current version, bounded in pages
    (least recently used thread out).

    Safe with several gateway processes: a stored manifest changes, and a parent link appears, only together
    with the thread's version (scripts of the consolidator; a new page changes no stored one, and ids are
    content hashes), and every request reads the version first, atomically with what it reads of the thread."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._threads: OrderedDict[str, KnownPages] = OrderedDict()

    def known(self, scope: str, version: str | None) -> KnownPages:
        """The thread's known pages at ``version``; a new, empty record when the version changed (one not
        kept at all when the thread has no version: then nothing is cached)."""
        if version is None:
            self._threads.pop(scope, None)
            return KnownPages(None)
        known = self._threads.get(scope)
        if known is None or known.version != version:
            known = self._threads[scope] = KnownPages(version, known)
        self._threads.move_to_end(scope)
        return known

    def carried(self, scope: str, earlier: KnownPages, version: str, changed: set[str]) -> KnownPages:
        """The thread's known pages at ``version``, from ``earlier`` (a version before it): its manifests and
        parents but those of the ``changed`` pages, which the changes between them wrote (`RedisStore.snapshot`
        reads them from the thread's change log); the pages it did not know are read when asked for."""
        known = KnownPages(version, earlier)
        known.manifests, known.parents, known.called = earlier.manifests.copy(), earlier.parents.copy(), earlier.called.copy()
        for page in changed:
            gone = known.manifests.pop(page, None)
            known.parents.pop(page, None)
            if gone is not None and gone.called:
                known.called.subtract(gone.called)
        known.called = +known.called  # (no count at or below zero)
        self._threads[scope] = known
        self._threads.move_to_end(scope)
        return known

    def version(self, scope: str) -> str | None:
        """The version the thread's cached pages were read at (``None``: none cached)."""
        known = self._threads.get(scope)
        return known.version if known is not None else None

    def trim(self) -> None:
        size = sum(len(k.manifests) for k in self._threads.values())
        while size > self.capacity and len(self._threads) > 1:
            _, dropped = self._threads.popitem(last=False)
            size -= len(dropped.manifests)
