"""A request that names no thread continues the one its history carries, or starts its own; a client's side
request goes upstream as sent. Checked from outside: openai SDK -> gateway -> scripted upstream."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, ToolCall
from tests.support.gateway_process import GatewayProcess, gateway_config


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("thread-finding")
    with GatewayProcess(config=gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": 1200}), workdir=workdir) as process:
        yield process


class Session:
    """A client without a thread header: it resends its history with every turn, as chat clients do."""

    def __init__(self, gateway: GatewayProcess, key: str, system: str = "You are a helpful assistant.") -> None:
        self.client = openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0)
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        self.threads: list[str] = []

    def send(self, messages: list[dict[str, Any]], stream: bool = False) -> dict[str, Any]:
        if stream:
            with self.client.chat.completions.with_streaming_response.create(model="fake-model", messages=messages, stream=True) as raw:  # type: ignore[arg-type]
                self.threads.append(raw.headers["x-pcp-thread"])
                chunks = [json.loads(line[6:]) for line in raw.iter_lines() if line.startswith("data: {")]
            text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
            return {"role": "assistant", "content": text}
        raw = self.client.chat.completions.with_raw_response.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        self.threads.append(raw.headers["x-pcp-thread"])
        message = raw.parse().choices[0].message
        return message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})

    def ask(self, text: str, stream: bool = False) -> str:
        self.messages.append({"role": "user", "content": text})
        reply = self.send(self.messages, stream)
        self.messages.append(reply)
        return str(reply["content"])


def _key() -> str:
    return "sk-" + uuid.uuid4().hex[:10]


def _reply(recorded: Recorded) -> Reply:
    """A reply of its own to every request, as a model's are."""
    assert recorded.body is not None
    asked = str(recorded.body["messages"][-1]["content"])
    return Reply(content=f"About {asked!r} ({uuid.uuid4().hex[:8]}): " + " ".join(f"point {i} of {asked[:12]}" for i in range(30)))


def _sent(recorded: Recorded) -> str:
    return json.dumps(recorded.body)


def test_two_sessions_that_open_alike_are_two_threads_and_neither_request_carries_the_others_conversation(
    gw: GatewayProcess, upstream: FakeUpstream
) -> None:
    upstream.script(*[_reply] * 9)
    key = _key()
    one, two = Session(gw, key), Session(gw, key)
    for n in range(4):
        one.ask("Hello" if n == 0 else f"Project alpha question {n}: the secret is ALPHA-{n}.")
    sent_before = len(upstream.chat_requests)
    for n in range(4):
        two.ask("Hello" if n == 0 else f"Project beta question {n}.", stream=n % 2 == 1)
    assert len(set(one.threads)) == 1 and len(set(two.threads)) == 1 and one.threads[0] != two.threads[0]
    assert not any("ALPHA-" in _sent(r) for r in upstream.chat_requests[sent_before:])


def test_a_session_whose_first_exchange_is_word_for_word_anothers_is_not_taken_for_it(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    """"Hello" answered alike in two sessions: the second's first exchange is stored in the first's thread. Its
    first request's thread stores nothing (its answer is claimed twice, so it names neither thread); from its
    second request on it has a thread of its own."""
    upstream.script(*[Reply(content="Hello! How can I help?"), _reply, _reply] * 2, _reply)
    key = _key()
    one, two = Session(gw, key), Session(gw, key)
    for n in range(3):
        one.ask("Hello" if n == 0 else f"Project alpha question {n}: the secret is ALPHA-{n}.")
    sent_before = len(upstream.chat_requests)
    for n in range(4):
        two.ask("Hello" if n == 0 else f"Project beta question {n}.")
    assert len(set(one.threads)) == 1 and len(set(two.threads[1:])) == 1 and not set(one.threads) & set(two.threads)
    assert not any("ALPHA-" in _sent(r) for r in upstream.chat_requests[sent_before:])
    other_tenant = Session(gw, _key())  # and another key never reaches this tenant's threads, whatever it sends
    other_tenant.send(one.messages + [{"role": "user", "content": "And now?"}])
    assert other_tenant.threads[0] not in (one.threads[0], two.threads[0])


def test_one_session_stays_one_thread_when_a_turn_is_retried_regenerated_edited_or_summarized(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(*[_reply] * 12)
    session = Session(gw, _key())
    session.send(session.messages + [{"role": "user", "content": "Question 0 about gardens and the code word WORD-0."}])  # retried:
    for n in range(5):
        session.ask(f"Question {n} about gardens and the code word WORD-{n}.")
    thread = session.threads[0]
    session.send(session.messages[:-1])  # the last answer regenerated
    session.send(session.messages[:5] + [{"role": "user", "content": "Question 2, asked differently."}])  # a turn edited
    # the client summarizes its own history, keeping the last exchange, as aider does (in one user message with it)
    summary = {"role": "user", "content": "I spoke to you previously about a number of things.\nI asked you about gardens."}
    session.messages = [session.messages[0], summary, *session.messages[-2:]]
    session.ask("Question 6 after the summary.")
    session.ask("Question 7 after the summary.", stream=True)
    assert set(session.threads) == {thread}, session.threads


def test_a_tool_round_stays_in_the_thread_of_the_turn(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content=None, tool_calls=[ToolCall("read", '{"path": "a.py"}')]), Reply(content="It prints hi."), _reply)
    session = Session(gw, _key())
    session.messages.append({"role": "user", "content": "What does a.py print?"})
    call = session.send(session.messages)
    session.messages += [call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "print('hi')"}]
    session.messages.append(session.send(session.messages))
    session.ask("Thanks, and why?")
    assert len(set(session.threads)) == 1


def test_a_side_request_of_a_client_goes_upstream_as_sent_and_stores_nothing(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="I asked you about gardens."), Reply(content="Garden questions"))
    key = _key()
    summarize = [
        {"role": "system", "content": "*Briefly* summarize this partial conversation about programming.\nInclude less detail about older parts."},
        {"role": "user", "content": "# USER\nWhat about gardens?\n# ASSISTANT\nThey grow.\n"},
    ]
    title = [
        {"role": "system", "content": "You are a title generator. You output ONLY a thread title. Nothing else."},
        {"role": "user", "content": "Generate a title for this conversation:\n"},
        {"role": "user", "content": "What about gardens?"},
    ]
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    for messages, whose in ((summarize, "aider"), (title, "opencode")):
        raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        assert raw.headers["x-pcp-side-request"] == whose and raw.headers["x-pcp-form"] == "pass-through"
        assert "x-pcp-thread" not in raw.headers
        sent = upstream.chat_requests[-1].body
        assert sent is not None and sent["messages"] == messages and "tools" not in sent
    threads = httpx.get(gw.root_url + "/pcp/threads", headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
    assert threads["data"] == []
