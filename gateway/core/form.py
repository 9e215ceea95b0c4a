"""The form a request goes upstream in (issue 12 item 3): ``RAW``, the client's messages exactly as sent, or
``PAGED``, the paged context.

Paging pays only when it makes a request smaller or the history no longer fits: a short thread sent as pages
costs more than the thread itself (the instructions, tags and summaries ride on top of what would have been
sent). So while the client's whole request fits the budget and is no larger than its paged form, it goes raw
(the budget, or, when the client's own parts leave less than `pcp.history_floor` of it, those parts and that
share: gateway.service.context);
pages are stored either way, so the thread is ready when it grows. Once a thread's history has outgrown the budget
it stays paged (:func:`pages_for_good`): switching back and forth would change what the model saw of the same
history from one turn to the next (and break the provider's prompt cache each time). A client that clears its
history (aider's ``/clear``: a request with no exchange before the live turn) starts over, raw while it fits. A request sent paged only
because paging made it smaller does not make its thread paged for good: the next one, whose paged form may be the
larger (another question shows other pages), would be sent paged with more tokens than the client sent.
"""

from __future__ import annotations

import enum

__all__ = ["Form", "choose_form", "pages_for_good"]


class Form(enum.Enum):
    RAW = "raw"
    PAGED = "paged"


def choose_form(*, raw_tokens: int, paged_tokens: int, budget: int, paged_before: bool) -> Form:
    """``RAW`` when the thread was never sent paged, and the client's request (``raw_tokens``, counted as the
    budget counts) fits ``budget`` and is no larger than the paged form (``paged_tokens``); else ``PAGED``."""
    if paged_before or pages_for_good(raw_tokens=raw_tokens, budget=budget) or raw_tokens > paged_tokens:
        return Form.PAGED
    return Form.RAW


def pages_for_good(*, raw_tokens: int, budget: int) -> bool:
    """Whether a request sent paged makes its thread paged for good: the client's request (``raw_tokens``) no longer
    fits ``budget``."""
    return raw_tokens > budget
