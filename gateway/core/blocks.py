"""Logical Blocks: the state machine that cuts an OpenAI message list into sealed blocks and the live tail.

A Logical Block (seed 004 §4.1.1) is the smallest unit of meaning: a user message, the execution chain that
followed it (assistant tool calls and their results, parallel calls included) and the final assistant reply.

The parser is a three-state machine, :data:`TRANSITIONS`. Each non-system message is classified as an
:class:`Event` and joins the current block (a new one is opened from ``IDLE``):

* ``USER`` / ``CALL`` / ``RESULT`` open a block from ``IDLE`` or extend the open one (consecutive user
  messages, interruptions and client tool results all stay in one block);
* ``REPLY`` (an assistant message without tool calls) makes the block ``REPLIED``; further replies join it (a
  burst of assistant messages is one answer sent in pieces, as people do in messaging apps). From ``IDLE`` a
  reply opens a block of its own, which covers histories that start with an assistant message. Calls still
  unanswered when a final reply arrives are abandoned.
* A ``USER`` message after a reply (:data:`SEALS`) seals the block and opens the next one; so does the end of
  the list after a reply. A block sealed by the end of the list may still grow when the client sends more
  replies after it: callers that reuse blocks across requests must not reuse that one
  (:attr:`Segmentation.open_ended`).

``system`` and ``developer`` messages are the client's system prompt, not part of any block, wherever they are.

Contract of :func:`split_blocks`: every input message lands in exactly one of ``system``, a sealed block or the
tail, and within each the input order is kept. The tail is the open block (the live turn), if any.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.errors import IllegalTransition
from gateway.core.messages import SYSTEM_ROLES, message_role, message_text, said_text, tool_calls_of, transcript

__all__ = ["Block", "BlockState", "Event", "SEALS", "Segmentation", "TRANSITIONS", "classify", "next_block_state", "split_blocks"]


class BlockState(enum.Enum):
    IDLE = "IDLE"
    PROCESSING = "PROCESSING"
    REPLIED = "REPLIED"


class Event(enum.Enum):
    USER = "user message"
    CALL = "assistant tool call"
    RESULT = "tool result"
    REPLY = "assistant reply"


TRANSITIONS: Mapping[tuple[BlockState, Event], BlockState] = {
    (BlockState.IDLE, Event.USER): BlockState.PROCESSING,
    (BlockState.IDLE, Event.CALL): BlockState.PROCESSING,
    (BlockState.IDLE, Event.RESULT): BlockState.PROCESSING,
    (BlockState.IDLE, Event.REPLY): BlockState.REPLIED,
    (BlockState.PROCESSING, Event.USER): BlockState.PROCESSING,
    (BlockState.PROCESSING, Event.CALL): BlockState.PROCESSING,
    (BlockState.PROCESSING, Event.RESULT): BlockState.PROCESSING,
    (BlockState.PROCESSING, Event.REPLY): BlockState.REPLIED,
    (BlockState.REPLIED, Event.USER): BlockState.PROCESSING,  # in SEALS: the user message opens the next block
    (BlockState.REPLIED, Event.REPLY): BlockState.REPLIED,
    (BlockState.REPLIED, Event.CALL): BlockState.PROCESSING,
    (BlockState.REPLIED, Event.RESULT): BlockState.PROCESSING,
}
# (state, event) pairs that seal the current block before the message opens the next one
SEALS: frozenset[tuple[BlockState, Event]] = frozenset({(BlockState.REPLIED, Event.USER)})


def next_block_state(state: BlockState, event: Event) -> BlockState:
    """The state after ``event``; raises :class:`IllegalTransition` for a pair the table lacks."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition("logical block", getattr(state, "name", repr(state)), getattr(event, "name", repr(event))) from None


def classify(role: str, message: Mapping[str, Any]) -> Event:
    """The event a non-system message is for the block parser."""
    if role == "user":
        return Event.USER
    if role in ("tool", "function"):
        return Event.RESULT
    return Event.CALL if tool_calls_of(message) else Event.REPLY


@dataclass(frozen=True)
class Block:
    """A run of messages forming one Logical Block.

    ``messages`` are the original mappings in order, ``indexes`` their positions in the input list.
    ``anchor_text`` is what the block's user messages say (their :func:`~gateway.core.messages.said_text`, newline-joined;
    empty without one).
    ``text`` is the transcript used as page content (see :func:`gateway.core.messages.transcript`).
    ``reply_text`` is the text of the final reply (its consecutive assistant messages, newline-joined);
    ``tool_names`` the functions called, in order. ``earlier_texts``: the ``text`` of each shorter block this one
    was, while the list ended after a reply that more replies followed (an earlier request sealed it there: a
    page it stored is this block's beginning, not another branch).
    """

    messages: tuple[Mapping[str, Any], ...]
    indexes: tuple[int, ...]
    anchor_text: str
    text: str
    reply_text: str
    tool_names: tuple[str, ...]
    earlier_texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Segmentation:
    """The result of :func:`split_blocks`.

    ``system``: the system/developer messages, in order. ``blocks``: the sealed blocks. ``tail``: the messages of
    the open block (the live turn), in order. ``tail_start``: the input index of the first tail message, or the
    input length when the tail is empty; system messages after it are still in ``system``, not in ``tail``.
    ``open_calls``: ids of tool calls in the tail still waiting for their result. ``open_ended``: the last
    block was sealed by the end of the list, so a later request may extend it with more replies.
    """

    system: tuple[Mapping[str, Any], ...]
    blocks: tuple[Block, ...]
    tail: tuple[Mapping[str, Any], ...]
    tail_start: int
    open_calls: tuple[str, ...] = ()
    open_ended: bool = False


def _build_block(items: Sequence[tuple[int, Mapping[str, Any], str]]) -> Block:
    user_texts = [text for text in (said_text(m) for _, m, _ in items if m.get("role") == "user") if text]
    assistant = [m for _, m, _ in items if m.get("role") == "assistant"]
    final: list[Mapping[str, Any]] = []
    for _, message, _ in reversed(items):
        if message.get("role") != "assistant" or tool_calls_of(message):
            break
        final.insert(0, message)
    lines = [line for _, _, line in items]
    replies = [m.get("role") == "assistant" and not tool_calls_of(m) for _, m, _ in items]
    return Block(
        messages=tuple(m for _, m, _ in items),
        indexes=tuple(i for i, _, _ in items),
        anchor_text="\n".join(user_texts),
        text="\n".join(line for line in lines if line),  # (a message of the client's context alone has none)
        reply_text="\n".join(text for text in (message_text(m) for m in final) if text),
        tool_names=tuple(call.name for m in assistant for call in tool_calls_of(m)),
        earlier_texts=tuple("\n".join(line for line in lines[:i] if line) for i in range(1, len(items)) if replies[i - 1] and replies[i]),
    )


def split_blocks(messages: Sequence[Mapping[str, Any]]) -> Segmentation:
    """Split an OpenAI message list into the system prompt, sealed Logical Blocks and the live tail.

    Raises :class:`gateway.core.errors.InvalidMessage` for an entry that is not a message with a known role.
    """
    roles = [message_role(message, index) for index, message in enumerate(messages)]
    call_names: dict[str, str] = {}  # only calls seen so far: a sealed block never depends on later messages
    system: list[Mapping[str, Any]] = []
    blocks: list[Block] = []
    current: list[tuple[int, Mapping[str, Any], str]] = []
    pending: dict[str, None] = {}
    state = BlockState.IDLE
    for index, (role, message) in enumerate(zip(roles, messages)):
        if role in SYSTEM_ROLES:
            system.append(message)
            continue
        event = classify(role, message)
        if (state, event) in SEALS:
            blocks.append(_build_block(current))
            current, pending = [], {}
        if event is Event.CALL:
            calls = [call for call in tool_calls_of(message) if call.id]
            call_names.update((call.id, call.name) for call in calls)
            pending.update((call.id, None) for call in calls)
        elif event is Event.RESULT:
            pending.pop(str(message.get("tool_call_id")), None)
        current.append((index, message, transcript(message, call_names)))
        state = next_block_state(state, event)
    open_ended = state is BlockState.REPLIED
    if open_ended:
        blocks.append(_build_block(current))
        current, pending = [], {}
    return Segmentation(
        system=tuple(system),
        blocks=tuple(blocks),
        tail=tuple(m for _, m, _ in current),
        tail_start=current[0][0] if current else len(messages),
        open_calls=tuple(pending),
        open_ended=open_ended,
    )
