"""The Consult and Shelve tools: their OpenAI function schemas and the parsing of a model's arguments.

Parsing is forgiving, because small models are sloppy: ``ids`` may be a list or a single string (also comma- or
space-separated), an ``id`` key is accepted as an alias, numbers are taken as ids, ids are trimmed,
lower-cased and de-duplicated in order, and arguments encoded twice as a JSON string are decoded. A missing
reason is recorded as ``(no reason given)``. Anything unusable becomes a :class:`ToolArgError` whose ``message``
tells the model, in plain words, how to call the tool correctly — never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_REASON", "ToolArgError", "ZoomArgs", "completed_json", "consult_schema", "parse_zoom_arguments", "shelve_schema"]

NO_REASON = "(no reason given)"
_SEPARATORS = re.compile(r"[\s,;]+")


def _schema(name: str, description: str, reason: str, ids: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                # ids first: a model writes the arguments in this order, and a call cut short (by the client's
                # max_tokens) is answered for the ids it completed; a long reason written first leaves none
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}, "description": ids},
                    "reason": {"type": "string", "description": reason},
                },
                "required": ["ids", "reason"],
                "additionalProperties": False,
            },
        },
    }


def consult_schema(name: str = "Consult") -> dict[str, Any]:
    """The OpenAI tool schema of Consult (zoom in), under ``name``."""
    return _schema(
        name,
        "Open pages of the conversation memory one level deeper to read them: a Summary page shows its full "
        "Content (Detail); a Consolidated page in Detail shows its child pages (Unpacked). Call this before "
        "answering whenever the answer depends on details that a Summary does not show.",
        "Why you need these pages, in one specific sentence. It is saved in the Reasoning_Trace.",
        "The page ids to open, copied exactly from a Node's id attribute or a Background_Context line, e.g. "
        "[\"a1b2c3d4e5\"].",
    )


def shelve_schema(name: str = "Shelve") -> dict[str, Any]:
    """The OpenAI tool schema of Shelve (zoom out), under ``name``."""
    return _schema(
        name,
        "Fold pages of the conversation memory one level back when you no longer need their details: Detail "
        "becomes Summary, Unpacked becomes Detail. Use it only on pages that are open.",
        "Why these pages are no longer needed, in one specific sentence. It is saved in the Reasoning_Trace.",
        "The page ids to fold, copied exactly from the id attribute of the Node elements.",
    )


@dataclass(frozen=True)
class ZoomArgs:
    """Parsed Consult/Shelve arguments: a non-empty tuple of distinct ids and the reason."""

    reason: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class ToolArgError:
    """Arguments that could not be used; ``message`` is the tool result to send back to the model."""

    message: str


def _usage(tool: str) -> str:
    return f'Call {tool} again with arguments like {{"ids": ["a1b2c3d4e5"], "reason": "why you need it"}}.'


def _ids(raw: object) -> list[str] | None:
    if isinstance(raw, str):
        return _SEPARATORS.split(raw)
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return [str(raw)]
    if isinstance(raw, list):
        found: list[str] = []
        for item in raw:
            ids = _ids(item) if not isinstance(item, list) else None
            if ids is None:
                return None
            found.extend(ids)
        return found
    return None


_CLOSERS = {"{": "}", "[": "]"}


def completed_json(text: str) -> str | None:
    """The JSON object ``text`` was becoming when it was cut short (a model's tool call that reached
    ``max_tokens``): cut back to its last complete member or element, the brackets still open closed; None when
    that gives no JSON object. ``{"ids": ["a1", "b2", "c`` becomes ``{"ids": ["a1", "b2"]}``: the element being
    written when the text ended is left out, since its end is unknown."""
    stack: list[str] = []
    cuts: list[tuple[int, tuple[str, ...]]] = []  # (end of a complete prefix, the brackets open there)
    in_string = escaped = False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(char)
            cuts.append((at + 1, tuple(stack)))
        elif char in "}]":
            if not stack or _CLOSERS[stack.pop()] != char:
                return None
            cuts.append((at + 1, tuple(stack)))
        elif char == ",":
            cuts.append((at, tuple(stack)))
    for end, open_ in reversed(cuts):
        candidate = text[:end] + "".join(_CLOSERS[b] for b in reversed(open_))
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        return candidate if isinstance(value, dict) else None
    return None


def parse_zoom_arguments(raw: str | Mapping[str, Any], tool: str = "Consult") -> ZoomArgs | ToolArgError:
    """Read the arguments of a Consult/Shelve call (``tool`` names it in error messages); arguments cut short
    are read as far as they are complete (:func:`completed_json`)."""
    value: object = raw
    for _ in range(2):  # arguments sometimes arrive JSON-encoded twice
        if not isinstance(value, str):
            break
        if not value.strip():
            return ToolArgError(f"The {tool} call had no arguments. " + _usage(tool))
        text = value
        try:
            value = json.loads(text)
        except ValueError as exc:
            completed = completed_json(text)
            read = parse_zoom_arguments(completed, tool) if completed is not None else None
            if isinstance(read, ZoomArgs):  # cut short after at least one whole id
                return read
            return ToolArgError(f"The arguments of {tool} are not valid JSON ({exc}). " + _usage(tool))
    if not isinstance(value, Mapping):
        return ToolArgError(f"The arguments of {tool} must be a JSON object. " + _usage(tool))
    raw_ids = value.get("ids", value.get("id"))
    ids = _ids(raw_ids)
    if ids is None:
        return ToolArgError(f'"ids" of {tool} must be a list of page id strings. ' + _usage(tool))
    # an id as the context shows it ("[a1b2c3d4e5]", a line's label) or quoted is the id
    bare = [part.strip().strip("\"'[]").strip().lower() for part in ids]
    clean = tuple(dict.fromkeys(part for part in bare if part))
    if not clean:
        return ToolArgError(f"{tool} needs at least one page id from the id attribute of a Node. " + _usage(tool))
    reason = value.get("reason")
    reason_text = reason.strip() if isinstance(reason, str) else ""
    return ZoomArgs(reason=reason_text or NO_REASON, ids=clean)
