"""The reasoning trace: the Consult / Shelve steps a model took, shown back to it as ``<Reasoning_Trace>``.

A trace is a tuple of :class:`Step`, oldest first, bounded in length: appending beyond the limit drops the
oldest steps first. What a request shows of it (:func:`shown_steps`) is the latest step of each action on each
page, and never more than the budget leaves (:func:`dropping_oldest`): the trace is the gateway's own text, so it
may not take a request over its budget the way the client's own parts may.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.core.pages import utc

__all__ = ["DEFAULT_TRACE_LIMIT", "REASON_CAP", "Step", "append_steps", "dropping_oldest", "shown_steps", "steps_for_call"]

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


def shown_steps(steps: Sequence[Step]) -> tuple[Step, ...]:
    """The steps a context shows: of the steps that took one action on one page, only the last (with its
    reason), where it stands in the trace. A model that consulted a page five times learns nothing more from five
    lines than from the last one, and each costs ~20 tokens of every later request."""
    last = {(step.action, step.target): n for n, step in enumerate(steps)}
    return tuple(step for n, step in enumerate(steps) if last[(step.action, step.target)] == n)


def dropping_oldest(steps: Sequence[Step], excess: int, cost: Callable[[Step], int]) -> tuple[Step, ...]:
    """``steps`` without their oldest ones, at least one and as many as it takes for the dropped steps' ``cost``
    to reach ``excess`` tokens (all of them if it never does)."""
    dropped = freed = 0
    while dropped < len(steps) and (dropped == 0 or freed < excess):
        freed += cost(steps[dropped])
        dropped += 1
    return tuple(steps[dropped:])
