"""Ingestion: a request's history split into Logical Blocks, the client's scaffolding told apart from the
conversation, and the conversation's sealed blocks stored as Original Pages (DESIGN §2 steps 2–4).

Only the pages the store does not have yet are made: summarized, counted and embedded,
so the cost of a request does not grow with what was already ingested. `pcp-gateway import` and `/save` do this
alone; every paged request does it first (gateway.service.context).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from gateway.adapters.embedder import Embedder
from gateway.adapters.embedding_models import DEFAULT_MODEL
from gateway.adapters.manifests import NewPage, sentences_vector_field, user_vector_field
from gateway.adapters.redis_store import RedisStore, ThreadKey
from gateway.adapters.snapshot import ThreadSnapshot
from gateway.config import PcpSettings
from gateway.core import Block, Page, TokenCounter, original_page, page_id, said_text, users_said
from gateway.core.continuation import answer_claims
from gateway.core.excerpt import labelled, sentences
from gateway.core.labels import called, label_shapes, side_names, speakers, without_labels
from gateway.core.lexical import term_counts
from gateway.core.lru import Lru
from gateway.core.original import kept_messages
from gateway.core.scaffolding import Layout, decide, scaffolding_blocks
from gateway.errors import InvalidRequest
from gateway.service.split_cache import Split, SplitCache, saves_of

__all__ = ["History", "Ingestion", "Matched", "matched_query", "matched_texts", "speakers_of"]

LAYOUTS_KEPT = 256  # threads whose last layout a process keeps parsed (as SplitCache keeps their splits)
SPEAKING = 3  # the last exchanges whose line labels say who is who (speakers_of): a label opens lines of two of them


@dataclass(frozen=True)
class History:
    """A request's messages as stored: its split, the scaffolding blocks, the positions of the conversation's
    blocks (the ones paged), their page ids in order, the ids that were new, what the request read of the
    thread, when the live turn was first asked (a retry or a client's tool round asks it again later), and the
    pages it stored."""

    split: Split
    scaffold: frozenset[int]
    keep: list[int]
    ids: list[str]
    added: list[str]
    snapshot: ThreadSnapshot
    asked_at: datetime
    pages: tuple[Page, ...] = ()  # the pages of ``added``


def _asked_at(
    blocks: Sequence[Block], ids: Sequence[str], missing: set[str], asked: tuple[str, float] | None, now: datetime
) -> tuple[datetime, int]:
    """When the new exchanges of a request were written: a client sends an exchange's question live, and the
    exchange is stored by the next request, which may come days later. The exchange whose question an earlier
    request recorded (`ThreadSnapshot.asked`) is dated by that request, and so are the new ones before it; returns
    that time and the exchange's position (-1 when none: every new page takes ``now``). A message is known by
    its text's content hash (`page_id`)."""
    if asked is None or not missing:  # nothing new to date (a retry, a tool round): no walk over the history
        return now, -1
    asked_id, at = asked
    for position in range(len(blocks) - 1, -1, -1):
        if ids[position] in missing and blocks[position].anchor_text and page_id(blocks[position].anchor_text) == asked_id:
            when = datetime.fromtimestamp(at, now.tzinfo)
            return (when, position) if when < now else (now, -1)
    return now, -1


@dataclass(frozen=True)
class Matched:
    """What a block is matched on, without the line labels (`gateway.core.labels`) that open the lines of its
    messages and its neighbours' (a speaker's name on every line): its transcript (counted into terms), the same
    without the transcript's own role prefixes (embedded), and its user's words."""

    transcript: str
    embedded: str
    anchor: str


def matched_texts(blocks: Sequence[Block], position: int) -> Matched:
    """What the block at ``position`` of ``blocks`` (a request's conversation, in order) is matched on."""
    near = blocks[max(position - 1, 0) : position + 2]
    shapes = label_shapes(said_text(m) for b in near for m in b.messages if m.get("role") in ("user", "assistant"))
    block = blocks[position]
    return Matched(without_labels(block.text, shapes), without_labels(block.text, shapes, roles=False),
                   without_labels(block.anchor_text, shapes))


def matched_query(query: str, blocks: Sequence[Block], tail: Sequence[Mapping[str, Any]]) -> str:
    """What the live turn's ``query`` is matched on: without the line labels its messages share with the last
    exchange's (`matched_texts`)."""
    texts = [said_text(m) for b in blocks[-1:] for m in b.messages if m.get("role") in ("user", "assistant")]
    shapes = label_shapes([*texts, *(said_text(m) for m in tail if m.get("role") == "user")])
    return without_labels(query, shapes)


def called_in(block: Block) -> tuple[tuple[str, str], ...]:
    """Each (role, name) by which ``block``'s user or assistant messages call the other side (`gateway.core.labels.called`),
    once per page: what the thread's side names are learnt from (`gateway.core.labels.side_names`). None where its
    messages open with labels of their own (``Emi: Hey Emily!``): such a chat says who speaks by the names it
    uses, which need not be those its people call each other by (a REALTALK chat's ``Emi`` and ``elise`` call each
    other Emily and Kate)."""
    if labelled(block.text):
        return ()
    found = {(str(m.get("role")), name) for m in block.messages if m.get("role") in ("user", "assistant") for name in called(said_text(m))}
    return tuple(sorted(found))


def speakers_of(blocks: Sequence[Block], tail: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Who the line labels of the thread's last exchanges and the live turn name (`gateway.core.labels.speakers`):
    a question that names a participant by their label is about their messages (`gateway.core.asked.participants`).
    A label opens its message's first line, which is all that is read: a pasted file is not walked line by line."""
    messages = [*(m for b in blocks[-SPEAKING:] for m in b.messages), *tail]
    return speakers([(str(m.get("role")), said_text(m).lstrip().partition("\n")[0])
                     for m in messages if m.get("role") in ("user", "assistant")])


@dataclass(frozen=True)
class _KeptLayout:
    """A thread's layout as stored (``raw``), parsed, and its ids and heads as written (once known)."""

    raw: str
    layout: Layout | None
    lists: tuple[str, str] | None


class Ingestion:
    """Stores what a request's history adds to its thread, with the client profiles' pins for its scaffolding."""

    def __init__(self, store: RedisStore, settings: PcpSettings, embedder: Embedder | None) -> None:
        self._store = store
        self._embedder = embedder
        self._counter = TokenCounter()  # pages are counted with one tokenizer whatever model a request names
        self._splits = SplitCache()
        self._layouts: Lru[str, _KeptLayout] = Lru(LAYOUTS_KEPT)  # per thread, its last layout
        self._sitting = settings.idle_flush_minutes * 60  # the quiet time that ends a sitting (ContextBuilder._same_sitting)
        self._inline = settings.inline_vectors
        self._background = settings.consolidation  # the thread's job, which makes vectors left for later, runs at all
        markers = settings.client_markers()  # the built-in client profiles' and the config's
        self._pins, self._preamble = markers.pins, markers.preamble

    def conversation(
        self, blocks: Sequence[Block], scaffold: frozenset[int] | None = None, saves: Sequence[int] | None = None
    ) -> list[int]:
        """Positions of the blocks that are conversation, the ones paged: not the client's scaffolding (found
        with the config's pins unless given), not a `/save` command (at ``saves`` when the split found them)."""
        if scaffold is None:
            scaffold = scaffolding_blocks(blocks, self._pins, self._preamble)
        left_out = set(scaffold).union(saves_of(blocks) if saves is None else saves)
        keep: list[int] = []
        start = 0
        for i in sorted(left_out):  # the runs between them, by range (a long thread's request: not a pass in Python)
            keep.extend(range(start, i))
            start = max(start, i + 1)
        keep.extend(range(start, len(blocks)))
        return keep

    async def _scaffolding(self, thread: ThreadKey, split: Split, snapshot: ThreadSnapshot, *, store: bool = True) -> frozenset[int]:
        """The client's scaffolding among the request's blocks, by their layout next to the thread's previous
        request's and by the config's pins (gateway.core.scaffolding); the layout is kept for the next request
        (unless ``store`` is false: a preview changes nothing)."""
        kept = self._layouts.get(thread.scope)
        if kept is not None and snapshot.layout is not None and kept.raw == snapshot.layout:
            previous = kept.layout  # what this process wrote or read last, unchanged: not parsed again
        else:
            previous = Layout.loads(snapshot.layout)
            kept = _KeptLayout(snapshot.layout or "", previous, None) if previous is not None else None
        decision = decide(split.blocks, split.ids, split.tail, previous, self._pins, self._preamble)
        layout = decision.layout
        if store and layout is not None and layout != previous:
            # a layout of the same blocks writes them as the last one did: only what changed is written anew
            same = kept is not None and kept.layout is not None and layout.ids is kept.layout.ids and layout.heads is kept.layout.heads
            if same and kept is not None and kept.layout is not None:
                lists = kept.lists or kept.layout.lists()
            else:  # (a layout that grew from the kept one: its lists written on from the kept ones)
                lists = layout.lists((kept.layout, kept.lists) if kept is not None and kept.layout is not None and kept.lists is not None else None)
            raw = layout.dumps(lists)
            await self._store.save_layout(thread, raw)
            self._layouts.put(thread.scope, _KeptLayout(raw, layout, lists))
        elif kept is not None:
            self._layouts.put(thread.scope, kept)
        return decision.scaffold

    async def ingest(
        self,
        thread: ThreadKey,
        blocks: Sequence[Block],
        now: datetime,
        known_ids: Sequence[str] | None = None,
        snapshot: ThreadSnapshot | None = None,
    ) -> tuple[list[str], list[str]]:
        """Store the blocks' pages that are new; return every block's page id in order, and the new ones. With
        the request's ``snapshot`` (which read these ids), what is missing is known without asking the store,
        and the pages stored are known to it as stored."""
        ids, added, _ = await self._ingest(thread, blocks, now, known_ids, snapshot)
        return ids, added

    async def _ingest(
        self,
        thread: ThreadKey,
        blocks: Sequence[Block],
        now: datetime,
        known_ids: Sequence[str] | None,
        snapshot: ThreadSnapshot | None,
        later: bool = False,
    ) -> tuple[list[str], list[str], tuple[Page, ...]]:
        """`ingest`, with the pages it stored; with ``later``, or when there are more than `pcp.inline_vectors` of them,
        their vectors are left to the background: embedding a long history sent at once (~10 ms a page on a core)
        would keep its first answer waiting for minutes. Never without consolidation: its job is what makes them."""
        ids = list(known_ids) if known_ids is not None else [page_id(block.text) for block in blocks]
        missing = set(snapshot.missing(ids) if snapshot is not None else await self._store.missing(thread, ids))
        later = (later or len(missing) > self._inline) and self._background
        sealed: dict[str, tuple[datetime, Block, Matched]] = {}
        count = self._counter.count
        asked = _asked_at(blocks, ids, missing, snapshot.asked if snapshot is not None else None, now)
        if missing and asked[1] >= 0 and await self._replied_later(thread, blocks[asked[1]], asked[0], now):
            asked = (asked[0], asked[1] - 1)  # the exchange is this request's; the ones before it stay the question's
        for position, (block, block_id) in enumerate(zip(blocks, ids) if missing else ()):  # (nothing new: no walk)
            if block_id in missing and block_id not in sealed:
                # pages sealed by one request share its time (the exchange a previous request asked, and those
                # before it, that request's); a microsecond per position keeps them in conversation order wherever
                # pages are sorted by time (rendering shows whole seconds)
                moment = (asked[0] if position <= asked[1] else now) + timedelta(microseconds=position)
                sealed[block_id] = (moment, block, matched_texts(blocks, position))
        # the names of a two-person chat's sides, learnt from the pages stored before and these: its pages' lines say who speaks
        calls = {block_id: called_in(block) for block_id, (_, block, _) in sealed.items()}
        names = (snapshot.side_names(calls.values()) if snapshot is not None
                 else side_names(Counter(pair for pairs in calls.values() for pair in pairs), len(calls)))
        fresh = {block_id: (original_page(block, moment, count, names=names), block, matched)
                 for block_id, (moment, block, matched) in sealed.items()}
        entries = list(fresh.values())
        pages = [page for page, _, _ in entries]
        # a page where others speak too gets a second embedding, of the user's own messages, and one per sentence
        # of them when they are several: a question about the user is matched on them (gateway.service.router);
        # a fact said in passing ("by the way, I just got a smoker") is averaged away in the message's embedding
        own = [i for i, (_, block, _) in enumerate(entries)
               if block.anchor_text and any(m.get("role") != "user" for m in block.messages)]
        user_at = set(own)
        said = {i: split for i in own if len(split := sentences(entries[i][2].anchor)) > 1} if self._embedder else {}
        texts = [matched.embedded for _, _, matched in entries] + [entries[i][2].anchor for i in own] + [t for i in said for t in said[i]]
        pending: dict[int, tuple[str, ...]] = {}
        if later and self._embedder is not None:  # the background makes them (gateway.service.reembedding)
            for i, page in enumerate(pages):
                pending[i] = (page.id, *((user_vector_field(page.id),) if i in user_at else ()),
                              *((sentences_vector_field(page.id),) if i in said else ()))
            texts = []
        vectors: list[Any] = list(await self._embedder.embed(texts)) if self._embedder and texts else [None] * len(texts)
        user_vectors = dict(zip(own, vectors[len(pages):]))
        sentence_vectors: dict[int, Any] = {}
        at = len(pages) + len(own)
        for i, split in said.items() if texts else ():
            rows = vectors[at : at + len(split)]
            at += len(split)
            if all(row is not None for row in rows):
                sentence_vectors[i] = np.vstack(rows)
        new = [
            NewPage.of(page, count, term_counts(matched.transcript), vectors[i] if texts else None, matched.anchor,
                       kept_messages(block), user_vectors.get(i), sentence_vectors.get(i),
                       self._embedder.model if self._embedder else DEFAULT_MODEL, pending.get(i, ()), calls[page.id])
            for i, (page, block, matched) in enumerate(entries)
        ]
        added = await self._store.add_pages(thread, new, now.timestamp(), snapshot)
        stored = set(added)
        return ids, added, tuple(page for page in pages if page.id in stored)

    async def _replied_later(self, thread: ThreadKey, block: Block, asked: datetime, now: datetime) -> bool:
        """Whether ``block``'s reply, first carried by this request, was written in a later sitting than its
        question (asked at ``asked``): a two-person chat replayed as one thread, whose other speaker opens the next
        session, or a reply written a day later. Then the exchange is dated by this request, the sitting its reply
        belongs to. A reply the gateway itself gave in the thread (its answer claim, `gateway.core.continuation`)
        was written when its question was asked, however late the client sends it back."""
        if (now - asked).total_seconds() <= self._sitting:
            return False
        claims = answer_claims(block.reply_text, ())
        return bool(claims) and not await self._store.made_claim(thread, claims[0])

    async def store_history(
        self, thread: ThreadKey, messages: Sequence[Mapping[str, Any]], now: datetime, *, store: bool = True,
        later: Callable[[ThreadSnapshot], bool] | None = None,
    ) -> History:
        """Split a request's messages and store its conversation's sealed blocks as pages (what every paged
        request does first; `pcp-gateway import` does only this). With ``store=False`` nothing is written, not
        even the thread's split cache: the blocks and their ids only. When ``later`` says so of the thread (read
        with the request), the new pages are stored without their vectors, which the thread's consolidation job
        makes (`gateway.service.reembedding`): a request sent raw has no use for them before its answer."""
        try:
            split = (self._splits if store else SplitCache(capacity=1)).split(thread.scope, messages)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="messages") from exc
        # one read of the thread for the whole request: its layout, and the stored pages among the blocks
        snapshot = await self._store.snapshot(thread, split.ids)
        # the client's scaffolding stays verbatim in its place and is never a page; only the conversation is paged
        scaffold = await self._scaffolding(thread, split, snapshot, store=store)
        keep = self.conversation(split.blocks, scaffold, split.saves)
        every = len(keep) == len(split.blocks)  # (the usual case: nothing left out, no walk to pick the rest)
        known = list(split.ids) if every else [split.ids[i] for i in keep]
        asking = users_said(split.tail)
        before = snapshot.asked if asking and snapshot.asked and snapshot.asked[0] == page_id(asking) else None
        asked_at = now if before is None else min(datetime.fromtimestamp(before[1], now.tzinfo), now)
        if not store:
            return History(split, scaffold, keep, known, [], snapshot, asked_at)
        deferred = later is not None and later(snapshot)
        ids, added, pages = await self._ingest(thread, split.blocks if every else [split.blocks[i] for i in keep], now, known, snapshot, deferred)
        if asking and before is None:
            await self._store.save_asked(thread, page_id(asking), now.timestamp())
        return History(split, scaffold, keep, ids, added, snapshot, asked_at, pages)
