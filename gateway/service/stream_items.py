"""What a streamed completion is made of, between the service and the edge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Comment", "KEEPALIVE", "StreamItem"]


@dataclass(frozen=True)
class Comment:
    """An SSE comment line: ignored by clients, it keeps the connection alive or carries a note."""

    text: str


KEEPALIVE = Comment("keep-alive")

StreamItem = dict[str, Any] | Comment
