"""The validated chat request, as the service layer sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatRequest", "RequestMeta"]


@dataclass(frozen=True)
class RequestMeta:
    """What the edge read from the request's headers."""

    authorization: str | None = None
    thread: str | None = None
    time: str | None = None
    budget: str | None = None
    pcp_off: bool = False


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completion request; `params` holds every other client parameter."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool
    params: dict[str, Any] = field(default_factory=dict)
    meta: RequestMeta = field(default_factory=RequestMeta)

    @property
    def include_usage(self) -> bool:
        options = self.params.get("stream_options")
        return bool(isinstance(options, dict) and options.get("include_usage"))

    def upstream_params(self) -> dict[str, Any]:
        """Everything sent upstream besides the model: messages and all client parameters."""
        return {"messages": self.messages, **self.params}
