"""The client's answer limit and a zoom round's larger one.

A round that offers Consult/Shelve may need more output than the client's answer limit: a small `max_tokens`
(48 for a short answer) cuts a Consult call before its first id. Such a round is sent with at least
`pcp.zoom_round_tokens`; when the model answers in it instead of zooming, the answer is cut at the client's own
limit, as the upstream would have cut it (``finish_reason: length``). The gateway counts with its own
tokenizer, so the cut is as close to the model's as the protocol allows: a whole reply is cut in proportion to the
model's own count of it (`usage.completion_tokens`); a streamed one, as it goes, by the gateway's count.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from gateway.core import TokenCounter

__all__ = ["LIMIT_KEYS", "StreamCut", "client_limit", "cut_answer", "raise_limit"]

LIMIT_KEYS = ("max_tokens", "max_completion_tokens")


def client_limit(params: Mapping[str, Any]) -> int | None:
    """The client's answer limit: the least of its `max_tokens` and `max_completion_tokens`; None when it set none."""
    limits = [v for v in (params.get(k) for k in LIMIT_KEYS) if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(limits) if limits else None


def raise_limit(params: MutableMapping[str, Any], floor: int) -> bool:
    """Raise the limits of ``params`` below ``floor`` to it; whether any was."""
    raised = False
    for key in LIMIT_KEYS:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < floor:
            params[key] = floor
            raised = True
    return raised


def cut_answer(text: str, limit: int, counter: TokenCounter, model_tokens: int | None = None) -> str | None:
    """``text`` cut to ``limit`` of the model's tokens (``model_tokens``: its count of the whole text, when known;
    else the gateway's count stands for it); None when it is within the limit."""
    tokens = counter.encoding.encode(text, disallowed_special=())
    used = model_tokens if model_tokens else len(tokens)
    if used <= limit:
        return None
    keep = len(tokens) * limit // used
    return counter.encoding.decode(tokens[:keep])


@dataclass
class StreamCut:
    """Passes a streamed answer's text on up to ``limit`` tokens (the gateway's count), then nothing."""

    limit: int
    counter: TokenCounter
    sent: str = ""
    cut: bool = False

    def take(self, text: str) -> str:
        """The part of ``text`` (the next piece of the answer) to pass on."""
        if self.cut or not text:
            return ""
        whole = self.sent + text
        kept = cut_answer(whole, self.limit, self.counter)
        if kept is None:
            self.sent = whole
            return text
        self.cut = True
        piece = kept[len(self.sent) :] if kept.startswith(self.sent) else ""
        self.sent += piece
        return piece
