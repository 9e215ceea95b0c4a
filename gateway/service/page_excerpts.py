"""A page's excerpts for one query (gateway.core.excerpt), with what recurs across queries kept in memory.

A page's units (its messages, lines or sentences, each counted and with its terms) and its background line are
functions of its content, summary and tokenizer: they are cut once per page and kept, when the page is stored
(`prepare`) by the process that stores it, else when a query first needs them. An excerpt's token count is the sum
of its parts' (`gateway.core.tokens.count_joined`), and the same parts of a page recur across its nested excerpts
and across questions: counts are kept per tokenizer, by text.
Both are bounded, least recently used out.

A page a query reads is cut once for good: its units are written to the store (`write`, the thread's `units` hash),
whether the query cut it or the process did as it stored the page (`prepare`), and a process that has not cut it (a
restarted gateway; one whose memory let it go, a long thread having more pages than it keeps) reads them there
(`read`) instead of counting and stemming its text again — on a long thread most of what a page costs the first time
a query reads it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence

import orjson

from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import Page, TokenCounter, background_line, excerpt_entry, map_text
from gateway.core.excerpt import ExcerptOption, Unit, excerpt_options, leading_options, line_coverage, speaking_share, units_of, whole_page
from gateway.core.lru import Lru
from gateway.core.tokens import KeptCounts, PerTokenizer
from gateway.core.worth import share_of

__all__ = ["UNITS_VERSION", "Names", "Offer", "PageExcerpts", "dump_units", "load_units"]

# What a page is offered for one query besides its line (PageExcerpts.of): the share of it its line covers (None:
# not counted), its excerpt options, and its speaking share.
Offer = tuple[float | None, tuple[ExcerptOption, ...], float]
# The names a two-person chat's sides are shown by, (role, name) pairs in order (`ThreadSnapshot.side_names`); empty:
# none known, the roles stay
Names = tuple[tuple[str, str], ...]

# the texts whose token counts are kept, per tokenizer: an excerpt is counted in its units' parts (`count_joined`),
# about five on the long thread, so that many times the 4,096 whole excerpts this once kept
EXCERPT_COUNTS = 5 * 4096
UNIT_CACHE = 4096  # pages whose excerpt units and background line are kept in memory
UNITS_VERSION = 1  # what `units_of` gives, as stored: a change to what it gives (or to `Unit`) takes the next number
FRESH_THREADS = 256  # threads whose units cut by a query wait to be written (a request that failed leaves some)


def dump_units(units: Sequence[Unit]) -> str:
    """``units`` as stored: one JSON row per unit (its terms sorted, one string where none holds a space; its side
    ``null`` where it is its speaker), compressed (zlib, base64: the store's client reads text)."""
    rows = []
    for u in units:
        found = list(u.terms)  # (sorted)
        rows.append([u.text, u.tokens, u.message, int(u.first), u.joiner, u.speaker, None if u.side == u.speaker else u.side,
                     found if any(" " in t for t in found) else " ".join(found)])
    return base64.b64encode(zlib.compress(orjson.dumps(rows), 1)).decode("ascii")


def load_units(raw: str) -> tuple[Unit, ...] | None:
    """The units :func:`dump_units` wrote; ``None`` for anything else (the page is then cut again)."""
    try:
        rows = orjson.loads(zlib.decompress(base64.b64decode(raw, validate=True)))
        return tuple(
            Unit(text, tokens, message, bool(first), joiner, speaker, speaker if side is None else side,
                 tuple(found.split(" ") if found else ()) if isinstance(found, str) else tuple(found))
            for text, tokens, message, first, joiner, speaker, side, found in rows
        )
    except (orjson.JSONDecodeError, zlib.error, binascii.Error, TypeError, ValueError):
        return None


def _key(thread: ThreadKey, page_id: str, counter: TokenCounter, names: Names) -> tuple[str, str, str, Names]:
    """A page's units' key in memory: they depend on the tokenizer and on the names the sides are shown by."""
    return counter.encoding_name, thread.scope, page_id, names


def _field(page_id: str, encoding: str, names: Names) -> str:
    """A page's units' field in the thread's ``units`` hash: the units' version, the tokenizer and the names."""
    tag = hashlib.blake2b(json.dumps(names).encode(), digest_size=6).hexdigest() if names else ""
    return f"{page_id}:{UNITS_VERSION}:{encoding}:{tag}"


class PageExcerpts:
    """The excerpts of pages for queries, cutting each page into units once."""

    def __init__(self, capacity: int = UNIT_CACHE) -> None:
        # per page, tokenizer and the names its sides are shown by: its units (content never changes), its
        # background line with the summary it was made from, and whether the store has the units (or will: `write`)
        self._pages: Lru[tuple[str, str, str, Names], tuple[tuple[Unit, ...], str, str, bool]] = Lru(capacity)
        self._counts = PerTokenizer(lambda counter: KeptCounts(counter, EXCERPT_COUNTS))
        self._fresh: Lru[str, dict[str, str]] = Lru(FRESH_THREADS)  # per thread: units cut by a query, not yet written

    def _units(
        self, thread: ThreadKey, page: Page, counter: TokenCounter, names: Names, write: bool = True
    ) -> tuple[tuple[Unit, ...], str]:
        key = _key(thread, page.id, counter, names)
        cached = self._pages.get(key)
        if cached is None or cached[1] != page.summary:  # the consolidator may rewrite a summary: its line with it
            units = units_of(page.content, counter.count, dict(names)) if cached is None else cached[0]
            cached = (units, page.summary, background_line(page), cached is not None and cached[3])
            self._pages.put(key, cached)
        if write and not cached[3]:  # a query reads the page: its units go to the store, whoever cut them
            fresh = self._fresh.get(thread.scope)
            if fresh is None:
                self._fresh.put(thread.scope, fresh := {})
            fresh[_field(page.id, counter.encoding_name, names)] = dump_units(cached[0])
            cached = (*cached[:3], True)
            self._pages.put(key, cached)
        return cached[0], cached[2]

    def prepare(self, thread: ThreadKey, pages: Iterable[Page], counter: TokenCounter, names: Names = ()) -> None:
        """Cut new pages into their units now, while they are stored: a later request that shortlists them
        (it matches them against its query) then finds them cut, and its work does not grow with the pages
        it has not seen before. (Written to the store once a query reads them: most pages never are.) Of a
        history longer than the cache keeps (a year's thread in its first request), only the last pages: the cache
        would let the others go as it cut them."""
        for page in list(pages)[-self._pages.capacity :]:
            self._units(thread, page, counter, names, write=False)

    async def read(self, store: RedisStore, thread: ThreadKey, pages: Iterable[Page], counter: TokenCounter, names: Names = ()) -> None:
        """The units of ``pages`` this process has not cut, read from the store where a query cut them before
        (one round trip, none when every page is cut here)."""
        missing = [p for p in pages if self._pages.get(_key(thread, p.id, counter, names)) is None]
        if not missing:
            return
        for page, raw in zip(missing, await store.cuts(thread, [_field(p.id, counter.encoding_name, names) for p in missing])):
            units = load_units(raw) if raw is not None else None
            if units is not None:
                self._pages.put(_key(thread, page.id, counter, names), (units, page.summary, background_line(page), True))

    async def write(self, store: RedisStore, thread: ThreadKey) -> None:
        """Store the units queries on ``thread`` cut since the last write (see the module docstring)."""
        fresh = self._fresh.get(thread.scope)
        if fresh:
            self._fresh.put(thread.scope, {})
            await store.save_cuts(thread, fresh)

    def of(
        self, thread: ThreadKey, page: Page, weights: Mapping[str, float], counter: TokenCounter, source: str | None,
        names: Names = (),
    ) -> Offer:
        """A page's line coverage, excerpt options (their tokens include the entry's) and speaking share
        (`speaking_share`) for a query whose terms weigh ``weights``; ``source``: see `query_source`. A page none of
        whose units holds a query word (it matches by meaning, or by its neighbours' words) is offered whole in its
        entry: as a Detail node it would cost the node's tags too (on the real chats such nodes took ~220 tokens of a
        2k context, and 4% of them held evidence)."""
        units, line = self._units(thread, page, counter, names)
        if not units:
            return None, (), 1.0
        count = self._count(counter)
        options = self._entries(page, excerpt_options(units, weights, count, source) or whole_page(units), count)
        return line_coverage(units, weights, line, source), options, speaking_share(units, source)

    def leading(self, thread: ThreadKey, page: Page, counter: TokenCounter, names: Names = ()) -> Offer:
        """What a page the live turn continues is offered whatever the query matches: its opening units, one more
        at a time (`leading_options`); its line is counted as usual."""
        units, _ = self._units(thread, page, counter, names)
        count = self._count(counter)
        return None, self._entries(page, leading_options(units, count), count), 1.0

    def mapped(self, page: Page, counter: TokenCounter) -> Offer:
        """A container's entry in the thread's map (`map_text`), as its one excerpt: a few tokens that name its
        topic, covering of it what a line of that size would."""
        count = self._count(counter)
        text = map_text(page)
        tokens = count(excerpt_entry(page.id, text))
        return None, (ExcerptOption((), text, tokens, share_of(tokens, page.tokens)),), 1.0

    def _count(self, counter: TokenCounter) -> Callable[[str], int]:
        """``counter.count`` of texts that recur, kept per tokenizer (`gateway.core.tokens.KeptCounts`)."""
        return self._counts.of(counter).count

    @staticmethod
    def _entries(page: Page, options: tuple[ExcerptOption, ...], count: Callable[[str], int]) -> tuple[ExcerptOption, ...]:
        """``options`` with the cost of their entry (``[id]``) added (built directly: `dataclasses.replace` is 5x slower)."""
        entry = count(excerpt_entry(page.id, ""))
        return tuple(ExcerptOption(o.chosen, o.text, o.tokens + entry, o.coverage) for o in options)
