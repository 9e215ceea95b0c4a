"""Conversation files: what `pcp-gateway import` reads and `pcp-gateway export` writes.

Two formats are read, told apart by their first non-blank character:

- OpenAI chat JSONL: one JSON object per line, ``{"messages": [...]}`` with an optional ``"thread"``; a message
  may carry a ``"timestamp"`` (ISO 8601, naive = UTC, or seconds since the epoch). Lines naming the same thread
  continue one conversation, in file order.
- ChatGPT's data export, ``conversations.json``: a list of conversations, each a ``mapping`` of nodes (``message``
  with ``author.role``, ``content.parts``, ``create_time``; ``parent``). The main branch is followed from
  ``current_node`` back to the root. Only the visible user and assistant text is kept (system prompts, tool
  traffic, hidden and non-text messages are left out); an assistant message takes the time of the user message
  it answers, so an exchange is one request (see `gateway.service.importer`).

Each conversation becomes a :class:`Conversation`: its thread name (or ``None``), its messages without their
timestamps, and each message's time (``None`` where none was given).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gateway.core import utc
from gateway.core.errors import InvalidMessage
from gateway.core.messages import message_role

__all__ = ["Conversation", "ChatFileError", "read_conversations", "export_line"]


class ChatFileError(ValueError):
    """A conversation file that cannot be read; the message names the place."""


@dataclass
class Conversation:
    thread: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    times: list[datetime | None] = field(default_factory=list)


def _time(value: object, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ChatFileError(f"{where}: timestamp must be ISO 8601 or seconds since the epoch, got {value!r}")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, timezone.utc)
    if isinstance(value, str):
        try:
            return utc(datetime.fromisoformat(value.strip()))
        except ValueError:
            pass
    raise ChatFileError(f"{where}: timestamp must be ISO 8601 or seconds since the epoch, got {value!r}")


def _jsonl(lines: Iterable[str]) -> list[Conversation]:
    by_thread: dict[str, Conversation] = {}
    conversations: list[Conversation] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ChatFileError(f"line {number}: not JSON ({exc.msg})") from exc
        if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
            raise ChatFileError(f'line {number}: expected an object with a "messages" list')
        thread = item.get("thread")
        if thread is not None and (not isinstance(thread, str) or not thread.strip()):
            raise ChatFileError(f'line {number}: "thread" must be a non-empty string')
        conversation = by_thread.get(thread) if thread else None
        if conversation is None:
            conversation = Conversation(thread)
            conversations.append(conversation)
            if thread:
                by_thread[thread] = conversation
        for index, message in enumerate(item["messages"]):
            where = f"line {number}, message {index}"
            try:
                message_role(message, index)
            except InvalidMessage as exc:
                raise ChatFileError(f"{where}: {exc.problem}") from exc
            conversation.times.append(_time(message.get("timestamp"), where))
            conversation.messages.append({k: v for k, v in message.items() if k != "timestamp"})
    return conversations


def _main_branch(mapping: Mapping[str, Any], current: object) -> list[Mapping[str, Any]]:
    """The nodes from the root to ``current`` (or to the last leaf when it is missing)."""
    if not isinstance(current, str) or current not in mapping:
        leaves = [key for key, node in mapping.items() if isinstance(node, dict) and not node.get("children")]
        current = leaves[-1] if leaves else None
    path: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in mapping and current not in seen:
        seen.add(current)
        node = mapping[current]
        if not isinstance(node, dict):
            break
        path.append(node)
        current = node.get("parent")
    return path[::-1]


def _visible_text(message: Mapping[str, Any]) -> tuple[str, str] | None:
    """(role, text) of a message a person saw in the chat, else None."""
    author = message.get("author") or {}
    role = author.get("role") if isinstance(author, dict) else None
    metadata = message.get("metadata") or {}
    if role not in ("user", "assistant") or (isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation")):
        return None
    if role == "assistant" and message.get("recipient", "all") != "all":  # a call to one of ChatGPT's tools
        return None
    content = message.get("content") or {}
    if not isinstance(content, dict) or content.get("content_type") not in ("text", "multimodal_text"):
        return None
    parts = [part for part in content.get("parts") or [] if isinstance(part, str)]
    text = "\n".join(parts)
    return (role, text) if text.strip() else None


def _chatgpt(items: Sequence[Any]) -> list[Conversation]:
    conversations: list[Conversation] = []
    for number, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("mapping"), dict):
            raise ChatFileError(f'conversation {number}: expected an object with a "mapping"')
        thread = item.get("conversation_id") or item.get("id")
        conversation = Conversation(thread if isinstance(thread, str) and thread.strip() else None)
        start = _time(item.get("create_time"), f"conversation {number}")
        exchange_time = start
        for node in _main_branch(item["mapping"], item.get("current_node")):
            message = node.get("message")
            seen = _visible_text(message) if isinstance(message, dict) else None
            if seen is None:
                continue
            assert isinstance(message, dict)
            role, text = seen
            when = _time(message.get("create_time"), f"conversation {number}") or exchange_time
            if role == "user":
                exchange_time = when
            conversation.messages.append({"role": role, "content": text})
            conversation.times.append(exchange_time if role == "assistant" else when)
        if conversation.messages:
            conversations.append(conversation)
    return conversations


def read_conversations(path: Path) -> list[Conversation]:
    """The conversations in a JSONL or ChatGPT-export file; raises :class:`ChatFileError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChatFileError(f"{path}: {exc}") from exc
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ChatFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
        return _chatgpt(data)
    return _jsonl(text.split("\n"))  # not splitlines: U+2028 may stand raw inside a JSON string


def export_line(thread: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """One JSONL line of a thread, in the format import reads."""
    return json.dumps({"thread": thread, "messages": list(messages)}, ensure_ascii=False)
