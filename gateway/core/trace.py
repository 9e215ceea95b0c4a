"""The reasoning trace: the Consult / Shelve steps a model took, shown back to it as ``<Reasoning_Trace>``.

A trace is a tuple of :class:`Step`, oldest first, bounded in length: appending beyond the limit drops the
oldest steps first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from gateway.core.pages import utc

__all__ = ["DEFAULT_TRACE_LIMIT", "REASON_CAP", "Step", "append_steps", "steps_for_call"]

DEFAULT_TRACE_LIMIT = 20
REASON_CAP = 500


@dataclass(frozen=True)
class Step:
    """One zoom action: ``action`` (tool name), ``target`` (page id), the model's ``reason`` and the ``time``
    (aware; a naive datetime is taken to be UTC)."""

    action: str
    target: str
    reason: str
    time: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "time", utc(self.time))


def append_steps(steps: tuple[Step, ...], new: Iterable[Step], limit: int = DEFAULT_TRACE_LIMIT) -> tuple[Step, ...]:
    """``steps`` followed by ``new``, keeping only the last ``limit`` (``limit`` >= 0)."""
    if limit < 0:
        raise ValueError("trace limit must be >= 0")
    combined = steps + tuple(new)
    return combined[len(combined) - limit :] if len(combined) > limit else combined


def steps_for_call(action: str, ids: Iterable[str], reason: str, time: datetime) -> tuple[Step, ...]:
    """One step per id of a tool call; a reason longer than :data:`REASON_CAP` characters is shortened."""
    text = " ".join(reason.split())
    if len(text) > REASON_CAP:
        text = text[: REASON_CAP - 1].rstrip() + "…"
    return tuple(Step(action=action, target=page_id, reason=text, time=time) for page_id in ids)
