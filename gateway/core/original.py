"""Giving an Original page's messages back, exactly as the client sent them (for `pcp-gateway export`).

A page's content is the block's transcript (:func:`gateway.core.messages.transcript`), which keeps every
message's text but not always the message: a ``name``, tool-call ids, content parts and any extra field are
lost, and a text containing a line that starts with ``user:`` cannot be told from two messages. So at ingestion
:func:`kept_messages` says what must be stored next to the page: nothing when the transcript gives the messages
back exactly (plain user / assistant text, the usual chat), else the messages as compact JSON.
:func:`page_messages` reads them back from the content and that stored text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.core.blocks import Block

__all__ = ["kept_messages", "page_messages", "thread_messages", "transcript_messages"]

_SPEAKERS = (("user: ", "user"), ("assistant: ", "assistant"))


def transcript_messages(content: str) -> list[dict[str, Any]]:
    """The plain user / assistant messages a transcript reads as: a line starting ``user: `` or
    ``assistant: `` opens a message, any other line continues the one before (or is dropped, before the first)."""
    messages: list[dict[str, Any]] = []
    lines: list[str] = []
    for line in content.split("\n"):
        opened = next(((role, line[len(prefix) :]) for prefix, role in _SPEAKERS if line.startswith(prefix)), None)
        if opened is None:
            lines.append(line)
            continue
        if messages:
            messages[-1]["content"] = "\n".join(lines)
        messages.append({"role": opened[0], "content": ""})
        lines = [opened[1]]
    if messages:
        messages[-1]["content"] = "\n".join(lines)
    return messages


def kept_messages(block: Block) -> str:
    """What to store with the block's page so that its messages can be given back: ``""`` when its transcript
    already gives them back exactly, else the messages as compact JSON."""
    messages = [dict(m) for m in block.messages]
    if transcript_messages(block.text) == messages:
        return ""
    return json.dumps(messages, ensure_ascii=False, separators=(",", ":"))


def page_messages(content: str, kept: str | None) -> list[dict[str, Any]]:
    """The messages of an Original page, from its content and what :func:`kept_messages` stored for it."""
    if kept:
        loaded: Sequence[Mapping[str, Any]] = json.loads(kept)
        return [dict(m) for m in loaded]
    return transcript_messages(content)


def thread_messages(pages: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """A thread's conversation from its Original pages' messages, in the order the pages were stored.

    A page whose messages begin a later page's is left out: it is the same exchange, stored before more
    replies extended it (a request that ended on a reply seals it; the next one may continue it)."""
    by_opening: dict[str, list[int]] = {}  # pages by their first message: only those can extend each other
    for n, page in enumerate(pages):
        if page:
            by_opening.setdefault(json.dumps(page[0], sort_keys=True, default=str), []).append(n)
    extended: set[int] = set()
    for group in by_opening.values():
        for k, n in enumerate(group):
            page = list(pages[n])
            if any(len(pages[m]) > len(page) and list(pages[m][: len(page)]) == page for m in group[k + 1 :]):
                extended.add(n)
    return [dict(m) for n, page in enumerate(pages) if n not in extended for m in page]
