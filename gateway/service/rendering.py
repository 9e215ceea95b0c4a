"""What a paged request's first round sends for one choice of the budget, and what that costs
(gateway.service.context fits the budget against it).

A :class:`Rendering` turns a :class:`~gateway.core.budget.FitResult` into the upstream messages: one system message
(the client's system prompt, then the ``<PagedContext>``), then the messages sent verbatim (the scaffolding, the
recent turns and the live turn). It counts a rendering as ``TokenCounter.count_messages`` would, counting the
verbatim messages once, and keeps the last rendering it measured, which is most often the one the fit keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from gateway.core import (
    FitResult,
    Page,
    PageTree,
    RenderInput,
    Step,
    TokenCounter,
    View,
    ViewState,
    background_lines,
    lead_text,
    message_text,
    nodes_from_state,
    render_context,
    shown_page,
)
from gateway.core.tokens import REPLY_PRIMING
from gateway.core.zoom_calls import ZoomNames
from gateway.service.page_excerpts import Offer

__all__ = ["Rendering", "shown_query"]

QUERY_CHARS = 500  # a longer live message is named in <Query> by its lead: the message itself follows, verbatim


def shown_query(query: str) -> str:
    """The ``<Query>`` text: the live message, or its lead when it is long (a pasted file, a client's reminders).
    The whole message follows the context verbatim; sending it twice would spend its tokens twice."""
    return query if len(query) <= QUERY_CHARS else lead_text(query, QUERY_CHARS)


def _same_choice(a: FitResult, b: FitResult) -> bool:
    """Whether two fits render the same context (``fit_rendered`` returns a copy with the measured total)."""
    return dict(a.views) == dict(b.views) and a.background_ids == b.background_ids and dict(a.excerpts) == dict(b.excerpts) and a.mapped == b.mapped


def _system_text(system: Sequence[Mapping[str, Any]], xml: str) -> str:
    client = "\n\n".join(text for text in (message_text(m) for m in system) if text)
    return f"{client}\n\n{xml}" if client else xml


class Rendering:
    """One request's renderings. ``wanted`` (the views below the top-level pages), ``excerpts`` (the pages'
    offers) and ``pages`` are what the fit being measured reads; the builder sets them for each attempt, and
    ``steps`` (the trace shown) once, before the first."""

    def __init__(
        self,
        *,
        now: datetime,
        query: str,
        steps: tuple[Step, ...],
        names: ZoomNames,
        system: Sequence[Mapping[str, Any]],
        live: Sequence[Mapping[str, Any]],
        live_tokens: int,
        flow: PageTree,
        pages: MutableMapping[str, Page],
        state: ViewState,
        counter: TokenCounter,
        sides: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        self._now, self._query, self.steps, self._names = now, shown_query(query), steps, names
        self._system, self._live, self._live_tokens = system, list(live), live_tokens
        self._flow, self._counter = flow, counter
        self.pages = pages
        self.wanted: dict[str, View] = dict(state)
        self.excerpts: dict[str, Offer] = {}
        self._last: tuple[FitResult, list[Mapping[str, Any]]] | None = None  # the last rendering measured
        # each top-level page's position in the flow, where the builder has it (the pool's table): the nodes shown are
        # then put in order by it, not by a walk over every page
        self.position: Mapping[str, int] | None = None
        self._sides = sides
        self._shown: dict[str, tuple[Page, Page]] = {}  # a page in Detail, and it as its node shows it (once each)

    def _shown_page(self, page: Page) -> Page:
        found = self._shown.get(page.id)
        if found is None or found[0] is not page:
            found = self._shown[page.id] = (page, shown_page(page, self._sides))
        return found[1]

    def compose(self, result: FitResult | None) -> list[Mapping[str, Any]]:
        """The messages for ``result`` (``None``: the context without a page)."""
        views = dict(result.views) if result else {}
        chosen = {i: self.excerpts[i][1][k].text for i, k in result.excerpts.items()} if result else {}
        background = background_lines((self.pages[i] for i in (result.background_ids if result else ())), chosen, result.mapped if result else ())
        nodes = nodes_from_state(self._flow, self.wanted, self.pages, roots=self._in_order(views), overrides=views, shown=self._shown_page)
        xml = render_context(RenderInput(
            now=self._now, query=self._query, steps=self.steps, background=background, nodes=nodes,
            consult_name=self._names.consult, shelve_name=self._names.shelve,
        ))  # fmt: skip
        return [{"role": "system", "content": _system_text(self._system, xml)}, *self._live]

    def _in_order(self, shown: Mapping[str, View]) -> list[str]:
        """The top-level pages among ``shown``, in the flow's order."""
        position = self.position
        if not shown:
            return []
        if position is not None and all(page in position for page in shown):
            return sorted(shown, key=position.__getitem__)
        return [r for r in self._flow.roots if r in shown]

    def counted(self, messages: list[Mapping[str, Any]]) -> int:
        """``counter.count_messages`` of a rendering: its system message, then the verbatim ones as counted before."""
        return REPLY_PRIMING + self._counter.count_message(messages[0]) + self._live_tokens

    def measure(self, result: FitResult) -> int:
        """What ``result`` costs rendered (``fit_rendered``'s ``measure``); the rendering is kept."""
        self._last = (result, self.compose(result))
        return self.counted(self._last[1])

    def messages(self, result: FitResult) -> tuple[Mapping[str, Any], ...]:
        """The messages for the fit kept: the last rendering measured, when it was of the same choice."""
        last = self._last
        return tuple(last[1] if last and _same_choice(last[0], result) else self.compose(result))
