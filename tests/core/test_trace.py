from __future__ import annotations

from datetime import datetime, timezone

import pytest

from gateway.core.trace import REASON_CAP, Step, append_steps, dropping_oldest, shown_steps, steps_for_call

T = datetime(2026, 2, 14, 10, 0, tzinfo=timezone.utc)


def step(n: int) -> Step:
    return Step("Consult", f"id{n}", f"reason {n}", T)


def test_append_drops_the_oldest_first() -> None:
    steps = append_steps((), [step(1), step(2)], limit=3)
    steps = append_steps(steps, [step(3), step(4)], limit=3)
    assert [s.target for s in steps] == ["id2", "id3", "id4"]
    assert append_steps(steps, [], limit=0) == ()
    assert append_steps((), [step(1)]) == (step(1),)


def test_negative_limit_is_rejected() -> None:
    with pytest.raises(ValueError):
        append_steps((), [], limit=-1)


def test_steps_for_call_one_per_id_with_a_bounded_reason() -> None:
    steps = steps_for_call("Shelve", ["a", "b"], "  done\n with   them ", datetime(2026, 2, 14, 10, 0))
    assert steps == (Step("Shelve", "a", "done with them", T), Step("Shelve", "b", "done with them", T))
    (long,) = steps_for_call("Consult", ["a"], "why " * 400, T)
    assert len(long.reason) == REASON_CAP and long.reason.endswith("…")


def test_a_context_shows_the_last_step_of_each_action_on_a_page_where_it_stands() -> None:
    trace = (
        Step("Consult", "a", "first look", T), Step("Consult", "b", "b", T), Step("Shelve", "a", "done", T),
        Step("Consult", "a", "again", T),
    )  # fmt: skip
    assert [(s.action, s.target, s.reason) for s in shown_steps(trace)] == [
        ("Consult", "b", "b"), ("Shelve", "a", "done"), ("Consult", "a", "again"),
    ]  # fmt: skip


def test_dropping_oldest_frees_at_least_the_excess_and_always_one_step() -> None:
    trace = tuple(step(n) for n in range(4))
    assert [s.target for s in dropping_oldest(trace, 25, lambda s: 10)] == ["id3"]
    assert [s.target for s in dropping_oldest(trace, 0, lambda s: 10)] == ["id1", "id2", "id3"]
    assert dropping_oldest(trace, 1000, lambda s: 10) == ()
    assert dropping_oldest((), 5, lambda s: 10) == ()
