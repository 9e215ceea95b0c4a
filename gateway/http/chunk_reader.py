"""Reading an upstream chat-completion stream chunk: what the Responses and Messages stream translators share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ChunkReader"]


class ChunkReader:
    """Keeps a stream's usage and finish reason as its chunks pass, and gives each chunk's first-choice delta."""

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage: Any = None

    def delta(self, chunk: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The first choice's delta of `chunk` (``{}`` when it has none), or None for a chunk without choices
        (the usage chunk); records usage and finish reason on the way."""
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return None
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta: Mapping[str, Any] = choice.get("delta") or {}
        return delta
