"""The Consult/Shelve loop as a sans-IO generator (PCP §VI; DESIGN §2 step 10).

:func:`zoom_rounds` decides, round by round, what the gateway asks the model and how it answers the model's
zoom calls, without doing any IO itself. It yields effects and receives their results:

- :class:`ModelCall` → the driver calls the model and sends back the assistant message (an OpenAI message
  mapping: ``content``, ``tool_calls``);
- :class:`NeedPages` → the driver loads those pages (with content) and sends back ``Mapping[id, Page]``.

It returns a :class:`RoundsOutcome` (via ``StopIteration.value``): the reply for the client with the zoom calls
stripped, how many model calls were made, and the new views and trace. Everything already sent stays
byte-identical across rounds: a round only appends the assistant's zoom calls and one tool result per call, which
carries the affected nodes rendered in their new views. After ``max_rounds`` rounds that offered the zoom tools,
one last call is made without them; zoom calls the model makes anyway are dropped from its reply.

A small model sometimes writes a zoom call as its message's text (``{"name": "pcp_consult", "arguments": …}``)
instead of as a tool call, above all in that last, tool-less round, where nothing parses it: such a text is taken
as the call it is (answered in a round that offers the tools, dropped in the last one), so it never reaches the
client as an answer. When the last round holds nothing but such calls, the model is asked once more, with what
the zoom rounds showed it appended to the Paged Context and no tool exchange left to imitate: dropped, the calls
would leave the client an empty answer. A Shelve of a page that a Consult opened during the same request is
refused with a nudge to answer (the model otherwise folds the page it just read and asks for it again).

A zoom call cut short (by ``max_tokens``) is answered for the ids it had completed and sent back as far as it was
read (other arguments that are not JSON, with ``{}``): a server that renders the conversation for its model parses
every earlier call, and llama-server refuses the whole next request (HTTP 500) over one it cannot. A round that
offered the zoom tools can still fail on the upstream's side because of them: llama-server answers HTTP 500 when
it cannot parse the tool call the model writes in that round. The driver then throws :class:`ZoomRoundFailed`
into the loop, which asks the same conversation once more without the zoom tools and offers them in no later
round: the client gets an answer from what the model has read so far, not an error.

The first round fits the request's token budget; what the Consults of later rounds open is bounded by the
:class:`Room` it left. A Consult opens the pages it names in order while their rendered nodes fit what is left of
the room; the first page a round opens always opens (a Consult that opened nothing would leave the model nowhere to
go), so each later round adds at most one page beyond the budget, and never one beyond the model's window. The
pages it does not open are answered "not opened" and stay as they were: a small model that asks for seven pages at
once then reads the one it named first, not seven pages it cannot tell apart. A container too large for the room
opens in the smallest of its views that fits, down to its Unpacked node in part: the children that best match the
query and the Consult's reason as nodes, the others listed by id, one Consult away; when nothing fits, that node
with one child is the page the round adds beyond the budget (a topic of 30 exchanges with ~140-token replies:
~520 tokens of tool result, against ~4,100 in Detail). Nor does an exchange larger than the request's budget
(``Room.page``: a pasted log, a whole file) open whole: it opens in part, as much as the budget holds of its
messages, lines or sentences that match the query and the Consult's reason, with ``…`` for the rest; consulted
again in the same request, it opens whole.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from gateway.core.in_part import container_in_part, exchange_in_part
from gateway.core.pages import Page
from gateway.core.render import NodeSpec, render_node, shown_page
from gateway.core.tools import ToolArgError, ZoomArgs, parse_zoom_arguments
from gateway.core.trace import Step, append_steps, steps_for_call
from gateway.core.views import PageTree, View, ViewState, ZoomResult, consult, shelve, view_of
from gateway.core.zoom_calls import ZoomNames, replayable, split_calls, text_call, with_text_call, without_zoom

__all__ = ["ModelCall", "NeedPages", "Room", "RoundsOutcome", "ZoomRoundFailed", "zoom_rounds"]


@dataclass(frozen=True)
class Room:
    """What a request's Consults may open beyond its first round: ``tokens`` of rendered nodes (the budget less the
    first round's prompt), each counted with ``count``. ``window``, when the model's is known, is what its window
    leaves beyond the first round: no page opens past it, not even a round's first (the upstream would refuse the
    whole request). ``page``, when set, bounds what a round's first page adds: a page whose Detail is larger than
    that opens in part (:func:`_excerpted`)."""

    tokens: int
    count: Callable[[str], int]
    window: int | None = None
    page: int | None = None


@dataclass(frozen=True)
class ModelCall:
    """Ask the model: ``messages`` is the whole conversation for this round; ``offer_zoom`` says whether the
    zoom tools are offered (the client's own tools always are)."""

    messages: tuple[Mapping[str, Any], ...]
    offer_zoom: bool
    round: int


@dataclass(frozen=True)
class NeedPages:
    """Load these pages, with their content."""

    ids: tuple[str, ...]


class ZoomRoundFailed(Exception):
    """Thrown into :func:`zoom_rounds` at a :class:`ModelCall` that offered the zoom tools, when the upstream failed
    on it (a server error, not the client's request): the round is asked again without them."""


@dataclass(frozen=True)
class RoundsOutcome:
    """The end of the loop. ``reply`` is the final assistant message with zoom calls removed; ``touched`` the
    ids whose view the model's calls changed (cascades included); ``consults`` the Consult calls resolved."""

    reply: Mapping[str, Any]
    rounds: int
    state: ViewState
    steps: tuple[Step, ...]
    touched: tuple[str, ...] = ()
    consults: int = 0


@dataclass(frozen=True)
class _Setup:
    tree: PageTree
    names: ZoomNames
    now: datetime
    trace_limit: int
    room: Room
    query: str
    sides: Mapping[str, str]  # the names a two-person chat's sides are shown by (role to name; empty: none)


@dataclass
class _Progress:
    state: ViewState
    steps: tuple[Step, ...]
    touched: dict[str, None] = field(default_factory=dict)
    opened: dict[str, None] = field(default_factory=dict)  # pages Consult opened during this request
    spent: int = 0  # tokens of the nodes Consult opened during this request
    consults: int = 0  # Consult calls resolved during this request
    # containers opened Unpacked in part (see gateway.core.in_part): the children shown as nodes, the others listed by id
    partial: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # pages opened in Detail in part (see _excerpted): the text their node shows
    excerpted: dict[str, str] = field(default_factory=dict)

    def copy(self) -> _Progress:
        return replace(self, touched=dict(self.touched), opened=dict(self.opened), partial=dict(self.partial), excerpted=dict(self.excerpted))


class _Unloaded(Exception):
    """Measuring or rendering a page needs these pages, which are not loaded yet."""

    def __init__(self, ids: Sequence[str]) -> None:
        super().__init__(ids)
        self.ids = tuple(ids)


@dataclass
class _Gate:
    """Whether a Consult may open one more page in this round: ``pages`` are loaded for rendering it; ``None``
    admits every page (the dry run that finds what to load)."""

    pages: Mapping[str, Page] | None
    gone: frozenset[str] = frozenset()  # asked for and not in the store (deleted since the context was built)
    opened_any: bool = False

    def unloaded(self, tree: PageTree, state: ViewState, ids: Sequence[str]) -> list[str]:
        """The pages a rendering of ``ids`` needs that are neither loaded nor known to be gone."""
        return [i for i in _needed(tree, state, ids) if i not in (self.pages or {}) and i not in self.gone]


_ANSWER_NOW = "Now answer the Query from this text, briefly; call no tool unless you need another page."
_KEEP_OPEN = "not folded: you opened it for this Query, its text is above; answer the Query from it now"
# only the ids: a line saying the budget is spent (with or without "Consult one alone if …") made Qwen2.5-Coder-1.5B
# Shelve the page it had just opened, in 4 of 4 recorded rounds, rather than answer from it
_NO_ROOM = "{}: not opened."


def _apply(call: Mapping[str, Any], setup: _Setup, progress: _Progress, gate: _Gate) -> tuple[str, tuple[str, ...]]:
    """Apply one zoom call; return its plain-language result and the ids to show in their new views."""
    function = call.get("function")
    assert isinstance(function, Mapping)  # split_calls only passes calls with a named function
    name = str(function.get("name"))
    args = parse_zoom_arguments(function.get("arguments") or "", tool=name)
    if isinstance(args, ToolArgError):
        return args.message, ()
    declined: tuple[str, ...] = ()
    if name == setup.names.shelve:  # folding a page opened for this very Query only undoes the answer's source
        kept = [page_id for page_id in args.ids if page_id in progress.opened]
        ids = tuple(page_id for page_id in args.ids if page_id not in progress.opened)
        refused = [f"{page_id}: {_KEEP_OPEN}" for page_id in kept]
        if not ids:
            return "\n".join(refused), ()
        args = ZoomArgs(args.reason, ids)
        result = shelve(progress.state, setup.tree, args.ids)
    else:
        result, declined = _consult_within(args, setup, progress, gate)
        progress.consults += 1
        refused = []
        args = ZoomArgs(args.reason, tuple(i for i in args.ids if i not in declined))
    progress.state = result.state
    progress.touched.update(dict.fromkeys(result.changed))
    action = "Shelve" if name == setup.names.shelve else "Consult"
    if args.ids:
        progress.steps = append_steps(progress.steps, steps_for_call(action, args.ids, args.reason, setup.now), setup.trace_limit)
    nudge = []
    if action == "Consult":
        opened = [i for i in args.ids if view_of(progress.state, i) is not View.SUMMARY]
        progress.opened.update(dict.fromkeys(opened))
        nudge = ([_NO_ROOM.format(", ".join(declined))] if declined else []) + ([_ANSWER_NOW] if opened else [])
    shown = tuple(page_id for page_id in args.ids if page_id in setup.tree)
    return "\n".join([*refused, *result.messages, *nudge]), shown


def _consult_within(args: ZoomArgs, setup: _Setup, progress: _Progress, gate: _Gate) -> tuple[ZoomResult, tuple[str, ...]]:
    """Consult ``args.ids`` in order, each page only while its rendered node fits the room left (the round's first
    opened page always); the result of those opened, and the ids declined. A container whose Detail does not fit
    opens one level deeper, Unpacked (its children's summaries, each of which the model may consult), when that
    is smaller: otherwise a container of a long topic, the round's first page, would bring all of it at once. An
    Unpacked node that does not fit either opens in part (:func:`_opening`). An exchange larger than ``Room.page``
    opens in part too (:func:`_excerpted`), and whole when a Consult names it again."""
    state = progress.state
    changed: list[str] = []
    messages: list[str] = []
    declined: list[str] = []
    for page_id in dict.fromkeys(args.ids):
        listed: list[str] = []
        again = page_id in progress.excerpted  # asked again: the rest of a page opened in part
        step = ZoomResult(state, (page_id,), (f"{page_id}: the whole text",)) if again else consult(state, setup.tree, [page_id])
        if gate.pages is not None and page_id in step.changed:
            left = setup.room.tokens - progress.spent
            cost = _cost(setup, gate, step.state, page_id)
            if cost > left and setup.tree.kids(page_id):
                step, cost, listed = _opening(setup, gate, progress, step, cost, page_id, left, args.reason)
            elif not again and setup.room.page is not None and cost > max(left, setup.room.page) and view_of(step.state, page_id) is View.DETAIL:
                cost, listed = _excerpted(setup, gate, progress, page_id, max(left, setup.room.page), args.reason, cost)
            spent = progress.spent + cost
            if (gate.opened_any and spent > setup.room.tokens) or (setup.room.window is not None and spent > setup.room.window):
                progress.partial.pop(page_id, None)
                if not again:
                    progress.excerpted.pop(page_id, None)
                declined.append(page_id)
                continue
            if again:
                del progress.excerpted[page_id]
            progress.spent += cost
            gate.opened_any = True
        state = step.state
        changed.extend(i for i in step.changed if i not in changed)
        messages.extend(step.messages)
        messages.extend(listed)
    return ZoomResult(state, tuple(changed), tuple(messages)), tuple(declined)


def _opening(
    setup: _Setup, gate: _Gate, progress: _Progress, step: ZoomResult, cost: int, page_id: str, left: int, reason: str
) -> tuple[ZoomResult, int, list[str]]:
    """How a container the Consult ``step`` opens, at ``cost``, and more than the ``left`` tokens, opens instead: the
    first of its Detail node, its Unpacked node and its Unpacked node in part that fits, else the smallest; with the
    lines that list what the last one leaves out (:func:`gateway.core.in_part.container_in_part`: the children that
    best match the query and the Consult's reason as nodes, the others by id). An opening in part is kept in
    ``progress``."""
    unpacked, whole = step, cost  # a container the Consult changed is in Detail now, or Unpacked (it was in Detail)
    if view_of(step.state, page_id) is View.DETAIL:
        deeper = consult(step.state, setup.tree, [page_id])
        unpacked = ZoomResult(deeper.state, tuple(dict.fromkeys(step.changed + deeper.changed)), step.messages + deeper.messages)
        whole = _cost(setup, gate, unpacked.state, page_id)
    pages = gate.pages or {}
    kids = [pages[kid] for kid in setup.tree.kids(page_id) if kid in pages]
    if whole <= left or not kids:  # every child deleted from the store since the context was built: nothing to choose
        return (unpacked, whole, []) if whole <= cost else (step, cost, [])
    shown, listed, part = container_in_part(pages[page_id], kids, left, setup.room.count, f"{setup.query}\n{reason}")
    if part >= min(cost, whole):
        return (step, cost, []) if cost <= whole else (unpacked, whole, [])
    progress.partial[page_id] = shown
    return unpacked, part, listed


def _excerpted(
    setup: _Setup, gate: _Gate, progress: _Progress, page_id: str, bound: int, reason: str, cost: int
) -> tuple[int, list[str]]:
    """How an exchange whose Detail node, at ``cost``, is larger than ``bound`` opens: in part
    (:func:`gateway.core.in_part.exchange_in_part`), kept in ``progress``, with the line that says a second Consult
    opens it whole, which a second Consult of the page in the same request does; or whole when no excerpt is smaller."""
    assert gate.pages is not None
    found = exchange_in_part(gate.pages[page_id], bound, setup.room.count, f"{setup.query}\n{reason}", setup.sides)
    if found is None or found[1] >= cost:
        return cost, []
    progress.excerpted[page_id] = found[0]
    note = f"{page_id}: shown in part, what matches the Query (… marks what is left out); Consult {page_id} again to read all of it"
    return found[1], [note]


def _cost(setup: _Setup, gate: _Gate, state: ViewState, page_id: str) -> int:
    """What ``page_id``'s node costs in ``state`` (0 for a page gone from the store); the pages it needs must be
    loaded (else :class:`_Unloaded`)."""
    assert gate.pages is not None
    unloaded = gate.unloaded(setup.tree, state, [page_id])
    if unloaded:
        raise _Unloaded(unloaded)
    return setup.room.count(render_node(_node(setup.tree, state, gate.pages, page_id, setup.sides))) if page_id in gate.pages else 0


def _needed(tree: PageTree, state: ViewState, ids: Sequence[str]) -> tuple[str, ...]:
    """Every page a rendering of ``ids`` in their views touches (children of Unpacked ones, recursively)."""
    found: dict[str, None] = {}
    stack = list(reversed(ids))
    while stack:
        page_id = stack.pop()
        if page_id in found:
            continue
        found[page_id] = None
        if view_of(state, page_id) is View.UNPACKED:
            stack.extend(reversed(tree.kids(page_id)))
    return tuple(found)


def _node(
    tree: PageTree, state: ViewState, pages: Mapping[str, Page], page_id: str, sides: Mapping[str, str],
    progress: _Progress | None = None,
) -> NodeSpec:
    """``page_id``'s node in ``state``, an exchange in Detail as its excerpts show it (``sides``, see
    :func:`gateway.core.render.shown_page`); with ``progress``, a container it opened in part shows only the children
    it chose, and a page it opened in part, in Detail, the text it chose."""
    view = view_of(state, page_id)
    if view is View.UNPACKED:  # a child deleted from the store since the context was built is left out
        kids = progress.partial.get(page_id, tree.kids(page_id)) if progress else tree.kids(page_id)
        return NodeSpec(pages[page_id], view, tuple(_node(tree, state, pages, kid, sides, progress) for kid in kids if kid in pages))
    if progress and view is View.DETAIL and page_id in progress.excerpted:
        return NodeSpec(replace(pages[page_id], content=progress.excerpted[page_id]), view)
    return NodeSpec(shown_page(pages[page_id], sides) if view is View.DETAIL else pages[page_id], view)


def zoom_rounds(
    messages: Sequence[Mapping[str, Any]],
    *,
    tree: PageTree,
    state: ViewState,
    steps: tuple[Step, ...],
    names: ZoomNames,
    now: datetime,
    max_rounds: int,
    room: Room,
    trace_limit: int = 20,
    query: str = "",
    sides: Mapping[str, str] = MappingProxyType({}),
) -> Generator[ModelCall | NeedPages, Any, RoundsOutcome]:
    """Drive the rounds of one request (see the module docstring). ``max_rounds`` >= 0; ``query``, the live turn's
    text, chooses what a page opened in part shows; ``sides``, the names a two-person chat's sides are shown by (its
    excerpts'), how an exchange a Consult opens names them."""
    setup = _Setup(tree, names, now, trace_limit, room, query, sides)
    progress = _Progress(state, steps)
    conversation = list(messages)
    round_number = 0
    while True:
        round_number += 1
        offer = round_number <= max_rounds
        try:
            answer = yield ModelCall(tuple(conversation), offer, round_number)
        except ZoomRoundFailed:
            if not offer:
                raise
            round_number += 1
            offer = False
            max_rounds = 0  # the tools made the upstream fail: no later round offers them
            answer = yield ModelCall(tuple(conversation), offer, round_number)
        message: Mapping[str, Any] = with_text_call(answer, names)
        ours, theirs = split_calls(message, names)
        if ours and offer and theirs:
            for call in ours:  # resolved here; the client gets its own calls and comes back with their results
                _apply(call, setup, progress, _Gate(None))
        if ours and not offer and not theirs and not message.get("content") and (zoomed := conversation[len(messages):]):
            # see the module docstring
            round_number += 1
            message = with_text_call((yield ModelCall(_read(messages, zoomed), False, round_number)), names)
            ours, theirs = split_calls(message, names)
        if not ours or not offer or theirs:
            return RoundsOutcome(without_zoom(message, theirs), round_number, progress.state, progress.steps, tuple(progress.touched),
                                 progress.consults)
        results, progress = yield from _answer_zoom_calls(ours, setup, progress)
        conversation.append({"role": "assistant", "content": message.get("content"), "tool_calls": [replayable(c) for c in ours]})
        conversation.extend(results)


def _read(messages: Sequence[Mapping[str, Any]], rounds: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """The first round's ``messages`` with the results of the zoom ``rounds`` that followed appended to its
    system message (the Paged Context), the rounds' tool calls left out."""
    read = "\n\n".join(str(m.get("content") or "") for m in rounds if m.get("role") == "tool")
    head = messages[0]
    return ({**head, "content": f"{head.get('content') or ''}\n\n{read}"}, *messages[1:])


def _answer_zoom_calls(
    calls: list[dict[str, Any]], setup: _Setup, progress: _Progress
) -> Generator[NeedPages, Any, tuple[list[dict[str, Any]], _Progress]]:
    """Apply the calls in order to a copy of ``progress``, then render the nodes they touched: one tool message per
    call, and the progress after them. Each page a Consult opens is measured before it opens, so the pages are
    loaded first: those the calls would touch if every page opened (a dry run), then, in the rare case that a
    smaller opening needs others, those, applying the calls again from the start."""
    dry = progress.copy()
    planned = [page_id for call in calls for page_id in _apply(call, setup, dry, _Gate(None))[1]]
    needed = _needed(setup.tree, dry.state, list(dict.fromkeys(planned)))
    pages: Mapping[str, Page] = (yield NeedPages(needed)) if needed else {}
    gone = frozenset(needed) - set(pages)
    while True:
        trial = progress.copy()
        try:
            gate = _Gate(pages, gone)
            outcomes = [_apply(call, setup, trial, gate) for call in calls]
            unloaded = gate.unloaded(setup.tree, trial.state, list(dict.fromkeys(i for _, ids in outcomes for i in ids)))
            if unloaded:
                raise _Unloaded(unloaded)
            break
        except _Unloaded as missing:
            loaded: Mapping[str, Page] = yield NeedPages(missing.ids)
            pages, gone = {**pages, **loaded}, gone | (set(missing.ids) - set(loaded))
    rendered: dict[str, str] = {}
    results = []
    for call, (text, ids) in zip(calls, outcomes):
        nodes = []
        for page_id in ids:
            if page_id not in rendered and page_id in pages:
                rendered[page_id] = render_node(_node(setup.tree, trial.state, pages, page_id, setup.sides, trial)).rstrip("\n")
                nodes.append(rendered[page_id])
        content = text if not nodes else text + "\n" + "\n".join(nodes)
        results.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
    return results, trial
