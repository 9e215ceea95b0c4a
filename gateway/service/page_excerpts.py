"""A page's excerpts for one query (gateway.core.excerpt), with what recurs across queries kept in memory.

A page's units (its messages, lines or sentences, each counted and with its terms) and its background line are
functions of its content, summary and tokenizer: they are cut once per page and kept, when the page is stored
(`prepare`) by the process that stores it, else when a query first needs them. An excerpt's token count is a function
of its text, and the same excerpts of a page recur across questions: counts are kept per tokenizer, by text.
Both are bounded, least recently used out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from gateway.adapters.store_keys import ThreadKey
from gateway.core import Page, TokenCounter, background_line, excerpt_entry, map_text
from gateway.core.excerpt import ExcerptOption, Unit, excerpt_options, leading_options, line_coverage, speaking_share, units_of, whole_page
from gateway.core.lru import Lru
from gateway.core.tokens import KeptCounts, PerTokenizer
from gateway.core.worth import share_of

__all__ = ["Names", "Offer", "PageExcerpts"]

# What a page is offered for one query besides its line (PageExcerpts.of): the share of it its line covers (None:
# not counted), its excerpt options, and its speaking share.
Offer = tuple[float | None, tuple[ExcerptOption, ...], float]
# The names a two-person chat's sides are shown by, (role, name) pairs in order (`ThreadSnapshot.side_names`); empty:
# none known, the roles stay
Names = tuple[tuple[str, str], ...]

EXCERPT_COUNTS = 4096  # excerpt texts whose token counts are kept, per tokenizer
UNIT_CACHE = 4096  # pages whose excerpt units and background line are kept in memory


class PageExcerpts:
    """The excerpts of pages for queries, cutting each page into units once."""

    def __init__(self, capacity: int = UNIT_CACHE) -> None:
        # per page, tokenizer and the names its sides are shown by: its units (content never changes), and its
        # background line with the summary it was made from
        self._pages: Lru[tuple[str, str, str, Names], tuple[tuple[Unit, ...], str, str]] = Lru(capacity)
        self._counts = PerTokenizer(lambda counter: KeptCounts(counter, EXCERPT_COUNTS))

    def _units(self, thread: ThreadKey, page: Page, counter: TokenCounter, names: Names) -> tuple[tuple[Unit, ...], str]:
        key = (counter.encoding_name, thread.scope, page.id, names)
        cached = self._pages.get(key)
        if cached is None or cached[1] != page.summary:  # the consolidator may rewrite a summary: its line with it
            cached = (units_of(page.content, counter.count, dict(names)) if cached is None else cached[0], page.summary, background_line(page))
            self._pages.put(key, cached)
        return cached[0], cached[2]

    def prepare(self, thread: ThreadKey, pages: Iterable[Page], counter: TokenCounter, names: Names = ()) -> None:
        """Cut new pages into their units now, while they are stored: a later request that shortlists them
        (it matches them against its query) then finds them cut, and its work does not grow with the pages
        it has not seen before."""
        for page in pages:
            self._units(thread, page, counter, names)

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
        """``options`` with the cost of their entry (``[id]``) added."""
        entry = count(excerpt_entry(page.id, ""))
        return tuple(replace(option, tokens=option.tokens + entry) for option in options)
