"""The form a request goes upstream in (issue 12 item 3), checked from outside: openai SDK -> gateway ->
scripted upstream. A thread whose whole request fits the budget goes raw, exactly as the client sent it, with
its pages stored; once it no longer fits it goes paged, and stays paged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from gateway.core import TokenCounter
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway_process import GatewayProcess, gateway_config

BUDGET = 700
KEY = "sk-form"


@pytest.fixture(scope="module")
def forming(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("form")
    config = gateway_config(fake.url, workdir / "data", pcp={"raw_form": True, "budget_tokens": BUDGET, "consolidation": False})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def chat(exchanges: int, question: str = "And what did you say about the second one?") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a concise assistant."}]
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"Tell me fact number {i} about lighthouses."})
        messages.append({"role": "assistant", "content": f"Fact {i}: lighthouse number {i} stands {20 + i} metres tall and its lamp turns every {i + 3} seconds."})
    return [*messages, {"role": "user", "content": question}]


def send(gateway: GatewayProcess, thread: str, messages: list[dict[str, Any]], stream: bool, **headers: str) -> tuple[httpx.Headers, str]:
    """The response headers and the answer's text."""
    client = openai.OpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, default_headers={"X-PCP-Thread": thread, **headers})
    if stream:
        response = client.chat.completions.with_raw_response.create(model="fake-model", messages=messages, stream=True)  # type: ignore[arg-type]
        text = "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
    else:
        response = client.chat.completions.with_raw_response.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        text = response.parse().choices[0].message.content or ""
    return response.headers, text


def inspect(gateway: GatewayProcess, thread: str) -> tuple[int, str]:
    """The thread's stored pages and its form, as `GET /pcp/threads/{thread}` shows them."""
    response = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    data = response.json()
    return data["total_pages"], data["form"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_thread_goes_raw_while_it_fits_then_paged_for_good(forming: GatewayProcess, upstream: FakeUpstream, stream: bool) -> None:
    thread = "form-" + uuid.uuid4().hex[:8]
    count = TokenCounter.for_model("fake-model").count_messages

    # a short thread: the upstream receives exactly the client's messages, and no zoom tools
    short = chat(4)
    assert count(short) <= BUDGET
    upstream.script(Reply(content="It turns every 4 seconds."))
    headers, text = send(forming, thread, short, stream)
    sent = upstream.chat_requests[-1].body or {}
    assert text == "It turns every 4 seconds."
    assert sent["messages"] == short and "tools" not in sent
    assert headers["x-pcp-form"] == "raw" and headers["x-pcp-pages"] == "0/4"
    assert int(headers["x-pcp-prompt-tokens"]) == count(sent["messages"]) == count(short)
    assert inspect(forming, thread) == (4, "raw")  # the pages are stored all the same

    # the thread grows past the budget: it goes paged, and says so before the first round
    long = chat(30)
    assert count(long) > BUDGET
    upstream.script(Reply(content="Paged answer."))
    headers, text = send(forming, thread, long, stream)
    sent = upstream.chat_requests[-1].body or {}
    assert text == "Paged answer." and headers["x-pcp-form"] == "paged"
    assert "<PagedContext" in sent["messages"][0]["content"] and any(t["function"]["name"] == "pcp_consult" for t in sent["tools"])
    assert int(headers["x-pcp-prompt-tokens"]) <= BUDGET < count(long)
    assert inspect(forming, thread) == (30, "paged")

    # and it stays paged, even for a request that would fit raw
    upstream.script(Reply(content="Still paged."))
    headers, text = send(forming, thread, short, stream)
    assert text == "Still paged." and headers["x-pcp-form"] == "paged"
    assert "<PagedContext" in (upstream.chat_requests[-1].body or {})["messages"][0]["content"]

    # until the client clears its history (aider's /clear): a request with no exchange before its live turn starts
    # over raw, and so do the short ones after it
    for messages in (chat(0), chat(2)):
        upstream.script(Reply(content="Raw again."))
        headers, text = send(forming, thread, messages, stream)
        assert text == "Raw again." and headers["x-pcp-form"] == "raw"
        assert (upstream.chat_requests[-1].body or {})["messages"] == messages


def test_a_budget_the_raw_thread_does_not_fit_sends_it_paged(forming: GatewayProcess, upstream: FakeUpstream) -> None:
    thread = "form-budget-" + uuid.uuid4().hex[:8]
    short = chat(4)
    upstream.script(Reply(content="ok"))
    headers, _ = send(forming, thread, short, False, **{"X-PCP-Budget": str(TokenCounter().count_messages(short) - 1)})
    assert headers["x-pcp-form"] == "paged"


def test_pass_through_says_so(forming: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="plain"))
    headers, text = send(forming, "form-off-" + uuid.uuid4().hex[:8], chat(1), False, **{"X-PCP-Mode": "off"})
    assert text == "plain" and headers["x-pcp-form"] == "pass-through"


def test_a_client_over_the_budget_goes_raw_while_its_history_fits_a_quarter_of_it(forming: GatewayProcess, upstream: FakeUpstream) -> None:
    """A client whose own parts alone exceed the budget (a coding assistant's) gets a quarter of the budget for what
    the gateway adds: the request goes raw while its history fits that quarter (and paging would not make it
    smaller), then paged, over budget by the client's own parts and no more than that quarter."""
    thread, budget = "form-over-" + uuid.uuid4().hex[:8], 2000
    count = TokenCounter.for_model("fake-model").count_messages
    rules = {"role": "system", "content": " ".join(f"Rule {n}: name things well." for n in range(360))}
    own = count([rules, chat(0)[-1]])
    assert own > budget

    short = [rules, *chat(3)[1:]]
    assert count(short) - own <= budget // 4
    upstream.script(Reply(content="raw"))
    headers, _ = send(forming, thread, short, False, **{"X-PCP-Budget": str(budget)})
    assert headers["x-pcp-form"] == "raw" and (upstream.chat_requests[-1].body or {})["messages"] == short

    long = [rules, *chat(30)[1:]]
    assert count(long) - own > budget // 4
    upstream.script(Reply(content="paged"))
    headers, _ = send(forming, thread, long, False, **{"X-PCP-Budget": str(budget)})
    assert headers["x-pcp-form"] == "paged" and headers["x-pcp-over-budget"] == "true"
    assert own < int(headers["x-pcp-prompt-tokens"]) <= own + budget // 4
    assert "Fact 29" in str((upstream.chat_requests[-1].body or {})["messages"])  # the exchange it follows, at least
