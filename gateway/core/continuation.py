"""Which thread a request continues when it names none: found by what its history contains.

A client resends its conversation with every request. What a thread holds is known by content: its stored
exchanges are pages whose ids are content hashes, and the answers the gateway gave in it (a reply's text, the
ids of the tool calls it returned) come back in the next request as they were sent. So each tenant has an index
from such a *claim* to the thread that made it (kept by the store):

* an **answer** claim: the hash of a final reply's text, or of a tool call's id, that the gateway returned in
  the thread (written when the response is complete);
* a **page** claim: the id of an exchange stored in the thread (written when the page is stored).

A claim made by two threads (the same exchange, or the same short reply, in two sessions) is *ambiguous* and
identifies neither. A request's **evidence** is the claims its history would make, most telling first, and a
bounded number of them whatever the thread's length:

1. the answers: the tool calls of its live turn, then the final reply and the tool calls of each of its last
   :data:`LOOKUP_BLOCKS` exchanges, most recent first. An answer is what the gateway said in one session: two
   sessions whose users typed the same words still got their own replies;
2. the pages: the same exchanges' ids, most recent first (a thread stored by `pcp-gateway import`, or before
   answers were recorded; an exchange the client changed the reply of).

The thread of the first evidence found that is not ambiguous is the request's thread; an exchange whose reply
is an ambiguous answer (the same opening answered alike in two sessions: "hi" → "Hello! How can I help?") is no
evidence either, though its page may be stored in one thread only so far. The client's scaffolding
(the blocks a profile's pins name: aider's example exchanges, the same in every session) is never evidence.
A request with no evidence found starts a thread: :func:`opening` is what names it (see
gateway.service.thread_finder).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.core.blocks import Block
from gateway.core.messages import tool_calls_of, users_said
from gateway.core.pages import page_id

__all__ = ["AMBIGUOUS", "LOOKUP_BLOCKS", "Evidence", "answer_claims", "continued", "evidence", "opening", "page_claim", "recent_exchanges"]

LOOKUP_BLOCKS = 8  # the most recent exchanges a request is looked up by: enough for an edit or a summary of the rest
CALLS_PER_MESSAGE = 4  # tool calls of one message looked up (a parallel burst of calls needs one of them)
AMBIGUOUS = "*"  # the index's value for a claim two threads made
_PAGE = "p:"
_REPLY = "r:"
_CALL = "c:"


def page_claim(stored_id: str) -> str:
    """The claim of a stored exchange (its page id)."""
    return _PAGE + stored_id


def _reply_claim(text: str) -> str | None:
    text = text.strip()
    return _REPLY + page_id(text) if text else None


def _call_claim(call_id: str) -> str:
    return _CALL + page_id(call_id)


def answer_claims(content: str | None, call_ids: Iterable[str]) -> list[str]:
    """The claims of an answer the gateway returned: its text (when it has one) and its tool calls' ids."""
    reply = _reply_claim(content or "")
    return [*([reply] if reply else []), *(_call_claim(i) for i in dict.fromkeys(call_ids) if i)]


def _calls(message: Mapping[str, Any]) -> list[str]:
    return [_call_claim(call.id) for call in tool_calls_of(message)[:CALLS_PER_MESSAGE] if call.id]


def recent_exchanges(blocks: Sequence[Block], scaffold: Collection[int], limit: int = LOOKUP_BLOCKS) -> list[int]:
    """The positions of the last ``limit`` blocks that are not scaffolding, most recent first."""
    return [i for i in range(len(blocks) - 1, -1, -1) if i not in scaffold][:limit]


@dataclass(frozen=True)
class Evidence:
    """A request's claims, most telling first, and for an exchange's page claim the claim of its reply."""

    claims: tuple[str, ...]
    replies: Mapping[str, str] = field(default_factory=dict)


def evidence(
    blocks: Sequence[Block], ids: Sequence[str], tail: Sequence[Mapping[str, Any]], scaffold: Collection[int],
    limit: int = LOOKUP_BLOCKS,
) -> Evidence:
    """The claims a request's history makes, most telling first (see the module docstring): ``blocks`` and
    their page ``ids`` are its sealed blocks, ``tail`` its live turn, ``scaffold`` the positions of the blocks
    that are the client's scaffolding."""
    recent = recent_exchanges(blocks, scaffold, limit)
    answers = [claim for m in reversed(tail) if m.get("role") == "assistant" for claim in _calls(m)]
    replies: dict[str, str] = {}
    for i in recent:
        reply = _reply_claim(blocks[i].reply_text)
        if reply:
            answers.append(reply)
            replies[page_claim(ids[i])] = reply
        answers += [claim for m in reversed(blocks[i].messages) if m.get("role") == "assistant" for claim in _calls(m)]
    return Evidence(tuple(dict.fromkeys([*answers, *(page_claim(ids[i]) for i in recent)])), replies)


def continued(found: Evidence, threads: Sequence[str | None]) -> str | None:
    """The thread of the first claim the index knows and does not hold ambiguous, an exchange whose reply it holds
    ambiguous left out (``threads``: the index's value for each of the claims, in order; ``None`` where it has none)."""
    held = dict(zip(found.claims, threads))
    for claim, thread in held.items():
        if thread and thread != AMBIGUOUS and held.get(found.replies.get(claim, "")) != AMBIGUOUS:
            return thread
    return None


def opening(blocks: Sequence[Block], tail: Sequence[Mapping[str, Any]], scaffold: Collection[int]) -> str:
    """What a request opens its conversation with: the user text of its first block that is not scaffolding,
    else its live turn's (a session's first request; its second carries that turn as its first exchange)."""
    first = next((b for i, b in enumerate(blocks) if i not in scaffold), None)
    if first is not None:
        return first.anchor_text
    return users_said(tail)
