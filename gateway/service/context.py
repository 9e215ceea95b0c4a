"""The first round's upstream messages of a paged request (DESIGN §2 steps 5–9), once its history is stored
(gateway.service.ingest).

The candidate pool is the pages of this request's own history that the skeleton does not already show verbatim
(the client's scaffolding, the recent turns, the live turn); gateway.service.view_choice chooses their views.
When they all fit whole, or none can, nothing is scored (`gateway.core.budget.shows_whole`).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence, Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from gateway.adapters.embedder import Embedder
from gateway.adapters.manifests import Manifest
from gateway.adapters.redis_store import RedisStore, ThreadKey
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.config import PcpSettings
from gateway.core import (
    Block,
    Page,
    PageTree,
    Step,
    TokenCounter,
    View,
    ViewState,
    client_context,
    consult_schema,
    dropping_oldest,
    normalize,
    said_text,
    shelve_schema,
    shown_steps,
    shows_whole,
    step_text,
    system_instructions,
)
from gateway.core.instructions import InstructionCosts, instruction_costs
from gateway.core.rounds import Room
from gateway.core.tokens import REPLY_PRIMING, KeptCounts, PerTokenizer
from gateway.core.worth import BACKGROUND_OVERHEAD
from gateway.core.zoom_calls import ZoomNames
from gateway.service.candidate_pool import fits_whole
from gateway.service.ingest import History, Ingestion, matched_query, speakers_of
from gateway.service.page_excerpts import Names, PageExcerpts
from gateway.service.page_tree import kept, open_folded_kept, visible_tree
from gateway.service.rendering import Rendering, shown_query
from gateway.service.router import Router
from gateway.service.split_cache import Pools
from gateway.service.view_choice import RECENT_SHARE, Layout, ViewChoice

__all__ = ["PagedContext", "ContextBuilder", "zoom_names"]

SKELETON_TOKENS = 65  # the PagedContext's tags and clock around the instructions and the query (cl100k, measured)


@dataclass(frozen=True)
class PagedContext:
    """Everything the rounds need, and what the response headers report."""

    thread: ThreadKey
    now: datetime
    messages: tuple[Mapping[str, Any], ...]
    names: ZoomNames
    zoom_tools: tuple[dict[str, Any], ...]
    tree: PageTree
    state: ViewState  # the views as rendered this turn: where the model's zoom starts
    persisted: Mapping[str, View]  # the thread's own zoom state, before this turn
    steps: tuple[Step, ...]
    shown: int
    total: int
    prompt_tokens: int
    history_tokens: int
    over_budget: bool
    ceiling: int  # what the request may fill up to: the budget, or its client's own parts and the history's floor
    # what the Consults of later rounds may open: what the first round left of its ceiling (or window); one page at
    # most its limit
    room: Room
    query: str = ""  # the live turn's text: what a page a Consult opens in part shows
    router_ms: float = 0.0
    added: tuple[str, ...] = ()
    grown: int = 0  # the tokens of the largest page this request stored: what the thread's next exchange may add
    raw_tokens: int | None = None  # the client's request in tokens, counted when its thread was never paged
    selected_by: str = "heuristic"  # who chose the views (gateway.service.router.Selection.decided_by)
    was_paged: bool = False  # whether a request of the thread went upstream paged before (gateway.core.form)
    exchanges: int = 0  # the conversation's exchanges in this request's history
    sides: Names = ()  # the names a two-person chat's sides are shown by: how an exchange a Consult opens names them


def zoom_names(client_tools: Sequence[Any]) -> ZoomNames:
    """`pcp_consult` / `pcp_shelve`, suffixed until no client tool has the same name."""
    taken = {
        t.get("function", {}).get("name") for t in client_tools if isinstance(t, dict) and isinstance(t.get("function"), dict)
    }
    suffix = ""
    n = 0
    while f"pcp_consult{suffix}" in taken or f"pcp_shelve{suffix}" in taken:
        n += 1
        suffix = f"_{n}"
    return ZoomNames(consult=f"pcp_consult{suffix}", shelve=f"pcp_shelve{suffix}")



def _tokens_of(manifests: Mapping[str, Manifest], history: AbstractSet[str]) -> int:
    return sum(m.page.tokens for i, m in manifests.items() if i in history)


def _opening_context(blocks: Sequence[Block]) -> str:
    """What the client wrote into the conversation's (``blocks``) first user message as its context, the messages
    before it that hold only such context included (Codex sends the session's as a message of its own)."""
    parts: list[str] = []
    for message in blocks[0].messages if blocks else ():
        if message.get("role") == "user":
            parts.append(client_context(message))
            if said_text(message):
                break
    return "\n".join(part for part in parts if part)


def _query(tail: Sequence[Mapping[str, Any]]) -> str:
    users = [said_text(m) for m in tail if m.get("role") == "user"]
    return users[-1] if users else ""


# texts of messages whose token counts a process keeps, per tokenizer: a thread's history comes back whole with each of
# its requests, and encoding it again (and once more for the form) was over a quarter of what a raw request cost
MESSAGE_TEXTS = 8192


class _MessageTokens:
    """``TokenCounter.count_message`` of one request's messages, each counted once: by identity, so only for
    messages the request holds until it ends (its split's), never for a rendering made and dropped; their texts by
    the counts the process keeps (:data:`MESSAGE_TEXTS`)."""

    def __init__(self, counter: TokenCounter, sent: KeptCounts) -> None:
        self._counter = counter
        self._sent = sent
        self._counts: dict[int, int] = {}

    def total(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """The sum of the messages' counts (without the reply priming ``count_messages`` adds)."""
        counts, total = self._counts, 0
        for message in messages:
            n = counts.get(id(message))
            if n is None:
                n = counts[id(message)] = self._counter.count_message(message, self._sent.count)
            total += n
        return total


class ContextBuilder:
    """Builds a PagedContext for one request from the store and the pcp settings."""

    def __init__(
        self,
        store: RedisStore,
        settings: PcpSettings,
        counter_for: Callable[[str], TokenCounter],
        window_for: Callable[[str], int | None],
        router: Router,
        embedder: Embedder | None,
    ) -> None:
        self._store = store
        self._router = router
        self._settings = settings
        self._counter_for = counter_for
        self._window_for = window_for
        self.history = Ingestion(store, settings, embedder)  # what a request adds to its thread
        self._excerpts = PageExcerpts()
        self._views = ViewChoice(store, router, settings, self._excerpts)
        # what the instructions' lines cost, per tokenizer, tool names and trace: the same few on every request
        self._explained: dict[tuple[str, str, str, bool], InstructionCosts] = {}
        self._instructions = PerTokenizer(lambda counter: counter.count(system_instructions()))  # the skeleton's estimate
        self._sent = PerTokenizer(lambda counter: KeptCounts(counter, MESSAGE_TEXTS))
        self._pools = Pools()

    async def build(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Any],
        thread: ThreadKey,
        now: datetime,
        budget: int,
        *,
        store: bool = True,
    ) -> PagedContext:
        """The first round's context; with ``store=False`` the thread is only read (a preview: no page is stored)."""
        counter = self._counter_for(model)
        tokens = _MessageTokens(counter, self._sent.of(counter))  # the request's own messages, counted once however often they are sent

        raw_tokens: int | None = None  # the client's request as the budget counts it, when the form weighs it

        def raw(snapshot: ThreadSnapshot) -> bool:
            """Whether the request may go upstream raw (gateway.core.form): then its new pages' vectors wait for
            the background, since nothing on its way to the answer compares them."""
            nonlocal raw_tokens
            if not self._settings.raw_form or snapshot.paged:
                return False
            raw_tokens = REPLY_PRIMING + tokens.total(messages)
            return raw_tokens <= budget

        stored = await self.history.store_history(thread, messages, now, store=store, later=raw)
        split, scaffold, keep, ids, added, snapshot = stored.split, stored.scaffold, stored.keep, stored.ids, stored.added, stored.snapshot
        sides = tuple(sorted(snapshot.side_names().items()))  # a chat between two people: its sides shown by name
        self._excerpts.prepare(thread, stored.pages, counter, sides)
        blocks = list(split.blocks) if len(keep) == len(split.blocks) else [split.blocks[i] for i in keep]  # (keep: ascending)
        query = _query(split.tail)
        scaffolding = [m for i in sorted(scaffold) for m in split.blocks[i].messages]
        follows = await self._same_sitting(stored)
        # The history keeps `pcp.history_floor` of the budget (by default the share the recent turns may take) whatever
        # the client's own parts take. A coding assistant's prompt, repository map and files can fill the budget alone
        # (aider's, with two modules added, ~4,600 tokens of a 4,000 budget); the budget cannot be kept then, and
        # without that share no earlier exchange would reach the model at all. The request is then over budget by its
        # client's parts, and the history (with the instructions that explain it) adds at most that share.
        # The context a client wrote into the conversation's first message (Claude Code's agents and skills lists, the
        # user's CLAUDE.md) is the session's: once that exchange is paged it stays, after the client's system prompt.
        opening = _opening_context(blocks)
        system = (*split.system, {"role": "system", "content": opening}) if opening else split.system
        client = REPLY_PRIMING + tokens.total([*system, *scaffolding, *split.tail])  # the client's own parts
        ceiling = max(budget, client + int(self._settings.history_floor * budget))  # what the request may fill up to
        own = client + self._instructions.of(counter) + SKELETON_TOKENS + counter.count(shown_query(query))
        cut = self._verbatim_from(blocks, budget, ceiling, tokens, own, follows)
        if cut == 0:  # the first exchange is sent as it is, its context with it
            system = split.system
        recent_ids, pool, history_ids = self._pools.of(thread.scope, ids, cut, split.earlier)
        tree, manifests = await visible_tree(snapshot, pool, history_ids, recent_ids)
        persisted, steps = snapshot.views, shown_steps(snapshot.steps)
        state = normalize({k: v for k, v in persisted.items() if k in tree}, tree)
        # the zoom works on `tree`; the budget and the rendering on `flow`, where the containers the model has
        # not opened are laid open
        flow, folded = open_folded_kept(snapshot, tree, state)

        # (over the kept ones, a map of its own: the rendering adds the pages it reads whole)
        pages: MutableMapping[str, Page] = ChainMap({}, kept(
            snapshot, "pages", tree, lambda: {i: m.page for i, m in manifests.items()},
            lambda before, added: {**before, **{i: manifests[i].page for i in added}},
        ))  # fmt: skip
        names = zoom_names(tools)
        verbatim = sorted(scaffold | set(keep[cut:]))  # the recent turns and the scaffolding, in request order
        live: list[Mapping[str, Any]] = [m for i in verbatim for m in split.blocks[i].messages] + list(split.tail)
        live_tokens = tokens.total(live)
        rendering = Rendering(
            now=now, query=query, steps=steps, names=names, system=system, live=live, live_tokens=live_tokens,
            flow=flow, pages=pages, state=state, counter=counter, sides=dict(sides),
        )  # fmt: skip
        fixed = rendering.counted(rendering.compose(None))
        window = self._window_for(model)
        limit = min(ceiling, window) if window is not None else ceiling
        while steps and fixed > limit:  # the trace is the gateway's text: it gives way, the oldest steps first
            steps = rendering.steps = dropping_oldest(steps, fixed - limit, lambda step: counter.count(step_text(step)))
            fixed = rendering.counted(rendering.compose(None))
        # the instructions explain an element only when the context has one: its first entry pays for the line
        key = (counter.encoding_name, names.consult, names.shelve, bool(steps))
        explained = self._explained.get(key)
        if explained is None:
            explained = self._explained[key] = instruction_costs(counter.count, names.consult, names.shelve, trace=key[3])
        background_overhead, flow_overhead = BACKGROUND_OVERHEAD + explained.background, explained.nodes
        seen = snapshot.last_seen(flow.roots, flow.is_root)
        # When every page could be shown whole, relevance has nothing to choose (a short thread, and every request
        # whose raw form is weighed against its paged one): the pages are fitted as equals, without the router (the
        # query's embedding, BM25, the router model's call). If one of them does not end whole after all, the
        # router decides as for any other request. Nor has it when no page can be shown: the client's own parts
        # leave no room below the model's window (or below the budget, with `pcp.history_floor: 0`).
        hopeless = fixed > limit
        equals = hopeless or fits_whole(flow.roots, manifests, limit - fixed - background_overhead - flow_overhead)
        layout = Layout(
            thread=thread, snapshot=snapshot, query=matched_query(query, blocks, split.tail), ids=ids, flow=flow, folded=folded, manifests=manifests,
            state=state, now=now, counter=counter, rendering=rendering, fixed=fixed, ceiling=ceiling, limit=limit,
            window=window, background_overhead=background_overhead, flow_overhead=flow_overhead, seen=seen,
            hopeless=hopeless, follows=ids[-1] if follows and ids and cut == len(blocks) else None,
            speakers=partial(speakers_of, blocks, split.tail), sides=sides,
        )  # fmt: skip
        for whole in (True, False) if equals else (False,):
            fitted = await self._views.fit(layout, whole)
            if not whole or hopeless or shows_whole(fitted.fit, fitted.candidates):
                break
        fit, wanted = fitted.fit, rendering.wanted
        # What the model sees is where its zoom starts: the budget's views for the top-level pages (a page
        # folded into the background is back in Summary), the wanted views below them. A page of a laid-open
        # container is in Summary for the zoom whatever it was shown as: consulting it opens its container.
        shown_state = {k: v for k, v in wanted.items() if k not in flow.roots} | dict(fit.views)
        history_tokens = kept(snapshot, "history_tokens", tree, lambda: _tokens_of(manifests, history_ids),
                              lambda before, added: before + sum(manifests[i].page.tokens for i in added)) + (  # (pool pages: of ids)
            REPLY_PRIMING + tokens.total(system) + live_tokens
        )
        return PagedContext(
            thread=thread,
            now=now,
            messages=rendering.messages(fit),
            names=names,
            zoom_tools=(consult_schema(names.consult), shelve_schema(names.shelve)),
            tree=tree,
            state=normalize({k: v for k, v in shown_state.items() if v is not View.SUMMARY}, tree),
            persisted=state,
            steps=steps,
            shown=len(fit.views) + len(fit.background_ids),  # as nodes or as Background_Context lines
            total=snapshot.page_count,
            prompt_tokens=fit.total_tokens,
            history_tokens=history_tokens,
            over_budget=fit.total_tokens > min(budget, limit),  # the ceiling is never below the budget
            ceiling=ceiling,
            room=Room(
                max(0, limit - fit.total_tokens), counter.count, None if window is None else max(0, window - fit.total_tokens), page=limit
            ),
            query=query,
            router_ms=fitted.router_ms,
            added=tuple(added),
            grown=max((page.tokens for page in stored.pages), default=0),
            raw_tokens=raw_tokens,
            selected_by=fitted.selected_by,
            was_paged=snapshot.paged,
            exchanges=len(ids),
            sides=sides,
        )

    async def _same_sitting(self, history: History) -> bool:
        """Whether the live turn was asked within `pcp.idle_flush_minutes` of the question of the exchange it
        follows: the quiet time after which that exchange's topic is flushed ends the sitting too. A user back
        after a pause asks afresh ("apply that" is said in the sitting that produced "that"), so the last
        exchange is then history like the rest. Unknown (no stored exchange, a clock that went back): the same."""
        if not history.ids:
            return True
        last = (await history.snapshot.manifests(history.ids[-1:])).get(history.ids[-1])
        if last is None:
            return True
        return history.asked_at.timestamp() - last.written_ts <= self._settings.idle_flush_minutes * 60

    def _verbatim_from(
        self, blocks: Sequence[Block], budget: int, ceiling: int, tokens: _MessageTokens, own: int, follows: bool
    ) -> int:
        """Where the verbatim recent exchanges begin: the last `pcp.recent_turns` blocks while they take at most
        RECENT_SHARE of the budget, else only the last one. In the sitting it was said in (``follows``) the
        exchange the live turn follows stays whole; after a pause it is kept only while it alone takes at most
        that share, as the ones before it are. Either way it is paged when it would not fit next to the
        client's own parts and the instructions (``own``) within ``ceiling``, what the history may fill the request up to."""
        first = max(len(blocks) - self._settings.recent_turns, 0)
        if first == len(blocks):
            return first
        sizes = [REPLY_PRIMING + tokens.total(block.messages) for block in blocks[first:]]
        if len(sizes) > 1 and sum(sizes) > RECENT_SHARE * budget:
            first, sizes = len(blocks) - 1, sizes[-1:]
        if not follows and sizes[-1] > RECENT_SHARE * budget:
            return len(blocks)
        return first if own + sum(sizes) <= ceiling else len(blocks)
