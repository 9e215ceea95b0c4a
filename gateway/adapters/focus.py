"""How a thread's focus is stored: the views the model's zoom left (a hash, page id to view) and its reasoning
trace (a list of JSON steps), as `RedisStore` writes and reads them."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime

from gateway.core import Step, View

__all__ = ["parse_focus", "parse_step", "step_json"]

log = logging.getLogger("gateway.store")


def parse_focus(views: Mapping[str, str], trace: Iterable[str]) -> tuple[dict[str, View], tuple[Step, ...]]:
    """A thread's views and trace, as stored by `RedisStore.save_focus`. An entry this gateway cannot read (a view
    another version or program wrote, a step that is not its JSON) is left out, and logged: they are where the
    model's zoom stands, worth less than the thread, whose every request would otherwise fail on them."""
    read: dict[str, View] = {}
    for page_id, view in views.items():
        try:
            read[page_id] = View(view)
        except ValueError:
            log.warning("left out a stored view this gateway cannot read: %r for page %s", view[:40], page_id)
    steps = []
    for raw in trace:
        try:
            steps.append(parse_step(raw))
        except (ValueError, KeyError, TypeError):
            log.warning("left out a stored trace step this gateway cannot read: %r", raw[:80])
    return read, tuple(steps)


def parse_step(raw: str) -> Step:
    data = json.loads(raw)
    return Step(data["action"], data["target"], data["reason"], datetime.fromisoformat(data["time"]))


def step_json(step: Step) -> str:
    return json.dumps(
        {"action": step.action, "target": step.target, "reason": step.reason, "time": step.time.isoformat()},
        ensure_ascii=False,
    )
