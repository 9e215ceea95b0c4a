"""The validated chat request, as the service layer sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatRequest", "RequestMeta", "RequestStats"]


@dataclass
class RequestStats:
    """What the service learns about one request as it serves it; the edge counts and logs it (no content)."""

    model: str | None = None  # set once the model is known to be configured and allowed
    thread: str | None = None
    form: str | None = None  # raw / paged / pass-through / local (answered by the gateway itself)
    rounds: int | None = None
    consults: int = 0
    shelves: int = 0
    prompt_tokens: int | None = None  # what the gateway sent upstream in the first round, by its own count
    history_tokens: int | None = None  # the thread's raw history, which paging replaced
    error: str | None = None  # the code of the error the request ended with
    degraded: str | None = None  # why it was served in a lesser form (store-unavailable: pass-through)
    router_fallback: bool = False  # pcp.router_model failed or timed out and the heuristic chose the views
    over_budget: bool = False  # sent paged over its budget: its client's own parts left the history less than pcp.history_floor


@dataclass(frozen=True)
class RequestMeta:
    """What the edge read from the request's headers, the tenant it decided, and the stats to fill."""

    authorization: str | None = None
    tenant: str = "anon"
    thread: str | None = None
    time: str | None = None
    budget: str | None = None
    pcp_off: bool = False
    stats: RequestStats = field(default_factory=RequestStats, compare=False, repr=False)


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
