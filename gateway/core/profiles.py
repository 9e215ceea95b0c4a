"""Client profiles: what the gateway knows of a client's fixed wording, built in and on by default.

A profile names a client and carries:

* ``pins`` and ``preamble``: regular expressions on a block's user text that mark the client's scaffolding
  (gateway.core.scaffolding: a pinned block is scaffolding wherever it sits; the first block matching a preamble
  marker closes the client's preamble of example exchanges);
* ``side_requests``: regular expressions on a request's first system message that mark a request the client
  makes for itself next to the conversation (aider's history summarizer, opencode's title generator): such a
  request goes upstream as sent and stores nothing, since it is not a turn of the conversation — its messages are
  an instruction and a copy of the conversation, or of one message of it.

Every marker is the client's own text, which nobody types by chance. The config adds markers of its own
(``pcp.pin``, ``pcp.pin_preamble``, ``pcp.side_request``) and turns a profile off (``pcp.profiles: {aider: false}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.messages import SYSTEM_ROLES, message_text

__all__ = ["PROFILES", "Profile", "ClientMarkers", "client_markers"]


@dataclass(frozen=True)
class Profile:
    """One client's fixed wording (see the module docstring)."""

    name: str
    pins: tuple[str, ...] = ()
    preamble: tuple[str, ...] = ()
    side_requests: tuple[str, ...] = ()


PROFILES: tuple[Profile, ...] = (
    Profile(
        "aider",  # aider-chat 0.86 (aider/coders/*_prompts.py, aider/prompts.py)
        pins=(
            r"^Here are summaries of some files present in my git repository\.",
            r"^I am working with you on code in a git repository\.",
            r"^Here are some READ ONLY files, provided for your reference\.",
            r"^I have \*added these files to the chat\*",
            r"^I am not sharing (any files that you can edit|the full contents of any files with you) yet\.",
            r"^Don't try and edit any existing code without asking me to add the files to the chat!",
        ),
        preamble=(r"^I switched to a new code base\. Please don't consider the above files",),
        side_requests=(r"^\*Briefly\* summarize this partial conversation about programming\.",),  # its history summarizer
    ),
    Profile(
        "opencode",  # opencode-ai 1.18: its title request and its compaction (the session's summary)
        side_requests=(
            r"^You are a title generator\. You output ONLY a thread title\.",
            r"^You are a context summarization agent\. You are given a conversation between a user and an agent\.",
        ),
    ),
)


@dataclass(frozen=True)
class ClientMarkers:
    """The markers in force: those of the profiles turned on, and the config's own, compiled."""

    pins: tuple[re.Pattern[str], ...]
    preamble: tuple[re.Pattern[str], ...]
    side_requests: tuple[tuple[str, re.Pattern[str]], ...]  # (whose: a profile's name or "config", marker)

    def side_request(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        """Whose side request ``messages`` are (a profile's name, or "config" for a marker of the config's), or
        ``None``: a side request's first message is a system message that one of the markers matches."""
        if not self.side_requests or not messages or messages[0].get("role") not in SYSTEM_ROLES:
            return None
        text = message_text(messages[0])
        return next((whose for whose, marker in self.side_requests if marker.search(text)), None)


def client_markers(
    off: Iterable[str] = (), pins: Iterable[str] = (), preamble: Iterable[str] = (), side_requests: Iterable[str] = ()
) -> ClientMarkers:
    """The built-in profiles but those named in ``off``, plus the given markers; raises ``ValueError`` naming an
    unknown profile and ``re.error`` for a marker that is not a regular expression."""
    unknown = sorted(set(off) - {p.name for p in PROFILES})
    if unknown:
        raise ValueError(f"unknown client profile(s) {', '.join(unknown)}; known: {', '.join(p.name for p in PROFILES)}")
    on = [p for p in PROFILES if p.name not in set(off)]

    def compiled(*groups: Iterable[str]) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(pattern) for pattern in dict.fromkeys(p for group in groups for p in group))

    sides = [(p.name, marker) for p in on for marker in p.side_requests] + [("config", marker) for marker in side_requests]
    return ClientMarkers(
        pins=compiled(*(p.pins for p in on), pins),
        preamble=compiled(*(p.preamble for p in on), preamble),
        side_requests=tuple((whose, re.compile(marker)) for whose, marker in sides),
    )
