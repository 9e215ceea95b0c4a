"""The client's answer limit around a zoom round's larger one (gateway.service.answer_limit): plain calls."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core import TokenCounter
from gateway.service.answer_limit import StreamCut, client_limit, cut_answer, raise_limit

COUNTER = TokenCounter()
LONG = " ".join(f"word{k}" for k in range(40))


@pytest.mark.parametrize(("params", "limit"), [({}, None), ({"max_tokens": 48}, 48), ({"max_tokens": 300, "max_completion_tokens": 40}, 40),
                                               ({"max_tokens": 0}, None), ({"max_tokens": True}, None), ({"max_tokens": "48"}, None)])
def test_the_clients_limit_is_the_least_it_set(params: dict[str, Any], limit: int | None) -> None:
    assert client_limit(params) == limit


def test_only_limits_below_the_floor_are_raised() -> None:
    params: dict[str, Any] = {"max_tokens": 48, "max_completion_tokens": 400, "temperature": 0}
    assert raise_limit(params, 256) and params == {"max_tokens": 256, "max_completion_tokens": 400, "temperature": 0}
    unset: dict[str, Any] = {"temperature": 0}
    assert not raise_limit(unset, 256) and unset == {"temperature": 0}
    assert not raise_limit({"max_tokens": 48}, 0)  # the floor off: the client's limit stands


def test_an_answer_is_cut_in_proportion_to_the_models_own_count() -> None:
    assert cut_answer("short", 10, COUNTER) is None
    own = COUNTER.count(LONG)
    mine = cut_answer(LONG, 10, COUNTER)
    assert mine is not None and LONG.startswith(mine) and COUNTER.count(mine) == 10
    theirs = cut_answer(LONG, 10, COUNTER, model_tokens=2 * own)  # the model counts twice as many: half as much text
    assert theirs is not None and LONG.startswith(theirs) and COUNTER.count(theirs) == own * 10 // (2 * own)
    assert cut_answer(LONG, own, COUNTER, model_tokens=own) is None


def test_a_streamed_answer_passes_on_up_to_the_limit_and_then_nothing() -> None:
    cut = StreamCut(8, COUNTER)
    pieces = [cut.take(w + " ") for w in LONG.split()]
    sent = "".join(pieces)
    assert cut.cut and LONG.startswith(sent.rstrip()) and COUNTER.count(sent) <= 8 and sent == cut.sent
    assert pieces[-1] == "" and cut.take("more") == ""
    whole = StreamCut(100, COUNTER)
    assert "".join(whole.take(w + " ") for w in LONG.split()[:5]) == " ".join(LONG.split()[:5]) + " " and not whole.cut
