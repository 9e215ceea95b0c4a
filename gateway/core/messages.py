"""Reading OpenAI chat messages: roles, text, tool calls and the transcript lines that become page content.

Messages are plain mappings as the OpenAI Chat Completions API sends them (``role``, ``content``, ``name``,
``tool_calls``, ``tool_call_id``, legacy ``function_call``). Nothing here mutates a message.

Text contract: :func:`message_text` returns the message's text exactly as sent (text parts of multi-part content
joined with a newline); non-text parts become a short placeholder (``[image]``, ``[audio]``, ``[file]``).
:func:`transcript` embeds that text verbatim, so every message's text can be found in the page content — but for
the context a client writes into its user's messages (:data:`CLIENT_CONTEXT`), which :func:`said_text` leaves out:
a page is what was said, and the messages as sent are kept beside it (gateway.core.original).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.errors import InvalidMessage

__all__ = [
    "CLIENT_CONTEXT",
    "KNOWN_ROLES",
    "SYSTEM_ROLES",
    "ToolCall",
    "client_context",
    "content_text",
    "message_role",
    "message_text",
    "said_text",
    "tool_calls_of",
    "transcript",
    "users_said",
]

SYSTEM_ROLES = frozenset({"system", "developer"})
KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

# What a client writes into its user's messages for the model, not the user's words: Claude Code's <system-reminder>
# parts (its agents and skills lists, the user's CLAUDE.md and the date in a session's first message; notes on files
# opened or changed, a todo list, in later ones); Codex CLI's user message of the session's context (the user's
# AGENTS.md under "# AGENTS.md instructions for <dir>", then <environment_context>: directory, shell, date). Stored as
# said, its words would match questions they have nothing to do with ("the code word" matches "code-review: Review
# the current diff…") and fill the excerpt of that page. A part begins a line, or follows another part at once (the
# Responses API's text parts are joined as they come), and ends its line: the tag quoted inside a line (a pasted
# source file) is text like any other.
_CONTEXT_PART = (
    r"<(?P<tag>system-reminder|environment_context)>.*?</(?P=tag)>"
    r"|\# AGENTS\.md\ instructions\ for\ [^\n]*\n\s*<INSTRUCTIONS>.*?</INSTRUCTIONS>"
)
_AFTER_PART = "|".join(f"(?<={end})" for end in ("</system-reminder>", "</environment_context>", "</INSTRUCTIONS>"))
CLIENT_CONTEXT = re.compile(
    rf"(?:^|{_AFTER_PART})(?:{_CONTEXT_PART})[ \t]*(?:$\s*|(?=<system-reminder>|<environment_context>))",
    re.DOTALL | re.MULTILINE,
)
_CLIENT_OPENINGS = ("<system-reminder>", "<environment_context>", "<INSTRUCTIONS>")

_PLACEHOLDERS = {
    "image_url": "[image]",
    "image": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "audio": "[audio]",
    "file": "[file]",
    "input_file": "[file]",
}


@dataclass(frozen=True)
class ToolCall:
    """One function call made by an assistant message. ``id`` is empty for a legacy ``function_call``."""

    id: str
    name: str
    arguments: str


def message_role(message: object, index: int) -> str:
    """The message's role; raises :class:`InvalidMessage` if it is not a mapping with a known string role."""
    if not isinstance(message, Mapping):
        raise InvalidMessage(index, f"expected an object, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str):
        raise InvalidMessage(index, "missing 'role'")
    if role not in KNOWN_ROLES:
        raise InvalidMessage(index, f"unknown role {role!r}")
    return role


def _part_text(part: object) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return "[unsupported content]"
    kind = part.get("type")
    if kind == "text" or (kind is None and isinstance(part.get("text"), str)):
        text = part.get("text")
        return text if isinstance(text, str) else ""
    if kind == "refusal":
        refusal = part.get("refusal")
        return refusal if isinstance(refusal, str) else ""
    if isinstance(kind, str):
        return _PLACEHOLDERS.get(kind, f"[{kind}]")
    return "[unsupported content]"


def content_text(content: object) -> str:
    """Text of a ``content`` value: a string as is, ``None`` as empty, a part list joined with newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(_part_text(part) for part in content)
    return str(content)


def message_text(message: Mapping[str, Any]) -> str:
    """The message's own text: its content, or its ``refusal`` when it has no content."""
    text = content_text(message.get("content"))
    refusal = message.get("refusal")
    if not text and isinstance(refusal, str):
        return refusal
    return text


def _text_with_context(message: Mapping[str, Any]) -> tuple[str, bool]:
    """:func:`message_text`, and whether it may hold a client's context (a user message with the opening tag)."""
    text = message_text(message)
    return text, message.get("role") == "user" and any(opening in text for opening in _CLIENT_OPENINGS)


def _said(message: Mapping[str, Any]) -> tuple[str, bool]:
    """:func:`said_text`, and whether the message held nothing but its client's context."""
    text, written = _text_with_context(message)
    if not written:
        return text, False
    said = CLIENT_CONTEXT.sub("", text)
    return said, not said


def said_text(message: Mapping[str, Any]) -> str:
    """:func:`message_text`, without the context a client wrote into a user message (:data:`CLIENT_CONTEXT`): the
    user's own words, what a page stores and a question is matched on."""
    return _said(message)[0]


def users_said(messages: Iterable[Mapping[str, Any]]) -> str:
    """What the user messages among ``messages`` say (:func:`said_text`), newline-joined: a live turn's words, which
    its query, its thread's finding and its stored time all read alike."""
    return "\n".join(text for text in (said_text(m) for m in messages if m.get("role") == "user") if text)


def client_context(message: Mapping[str, Any]) -> str:
    """The context a client wrote into a user message (:data:`CLIENT_CONTEXT`), its parts as sent, one after the
    other; empty when there is none."""
    text, written = _text_with_context(message)
    return "\n".join(found.group().rstrip() for found in CLIENT_CONTEXT.finditer(text)) if written else ""


def _arguments(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    if raw is None:
        return ""
    return json.dumps(raw, ensure_ascii=False, sort_keys=True)


def tool_calls_of(message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """The function calls an assistant message makes (``tool_calls``, or a legacy ``function_call``)."""
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls")
    if isinstance(raw_calls, Sequence) and not isinstance(raw_calls, str):
        for raw in raw_calls:
            if not isinstance(raw, Mapping):
                continue
            function = raw.get("function")
            function = function if isinstance(function, Mapping) else {}
            call_id = raw.get("id")
            name = function.get("name")
            calls.append(
                ToolCall(
                    id=call_id if isinstance(call_id, str) else "",
                    name=name if isinstance(name, str) else "unknown",
                    arguments=_arguments(function.get("arguments")),
                )
            )
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        name = legacy.get("name")
        calls.append(
            ToolCall(id="", name=name if isinstance(name, str) else "unknown", arguments=_arguments(legacy.get("arguments")))
        )
    return tuple(calls)


def _speaker(role: str, message: Mapping[str, Any]) -> str:
    name = message.get("name")
    return f"{role} ({name})" if isinstance(name, str) and name else role


def transcript(message: Mapping[str, Any], call_names: Mapping[str, str]) -> str:
    """The transcript lines of one message, its text verbatim (a user message's :func:`said_text`).

    ``user: <text>`` / ``assistant: <text>`` / ``assistant → tool call NAME(ARGS)`` (one line per call) /
    ``tool NAME result: <text>``; a ``name`` field shows as ``user (alice): ...``. ``call_names`` resolves a
    tool message's ``tool_call_id`` to the function name. A user message that holds only its client's context
    (Codex's message of the session's context) has no line: ``""``.
    """
    role = str(message.get("role"))
    text, context_only = _said(message)  # the user's words, not the client's context
    if context_only:
        return ""
    if role == "assistant":
        lines = [f"{_speaker(role, message)}: {text}"] if text else []
        lines.extend(f"assistant → tool call {call.name}({call.arguments})" for call in tool_calls_of(message))
        return "\n".join(lines) if lines else "assistant: "
    if role in ("tool", "function"):
        call_id = message.get("tool_call_id")
        name = call_names.get(call_id) if isinstance(call_id, str) else None
        if name is None:
            raw_name = message.get("name")
            name = raw_name if isinstance(raw_name, str) and raw_name else "unknown"
        return f"tool {name} result: {text}"
    return f"{_speaker(role, message)}: {text}"
