"""The client's scaffolding through the real path (openai SDK -> gateway -> scripted upstream, real Redis), with
requests shaped like the ones aider sends (recorded through the gateway; tests/clients drives aider itself)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config

BUDGET = 1400
Message = dict[str, Any]


def pair(question: str, answer: str) -> list[Message]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


EXAMPLES = pair("Change get_factorial() to use math.factorial", "To make this change we need to modify app.py ...") + pair(
    "I switched to a new code base. Please don't consider the above files or try to edit them any longer.", "Ok."
)
REPO = pair("Here are summaries of some files present in my git repository.\nmain.py:\n│import greet\n", "Ok, I won't try and edit those files without asking first.")


def files(version: int) -> list[Message]:
    body = "def greet(name):\n    return 'Hello ' + name\n" + "".join(f"\n\ndef extra_{i}():\n    return {i}\n" for i in range(version))
    return pair(f"I have *added these files to the chat* so you can go ahead and edit them.\n\ngreet.py\n```\n{body}```\n", "Ok, any changes I propose will be to those files.")


def exchange(n: int) -> list[Message]:
    return pair(f"Turn {n}: tell me about topic number {n} in detail.", f"Answer {n}: " + " ".join(f"fact-{n}-{i}" for i in range(60)))


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("scaffolding")
    pcp = {"budget_tokens": BUDGET, "recent_turns": 1, "consolidation": False}  # aider's markers are built in
    with GatewayProcess(config=gateway_config(fake.url, workdir / "data", pcp=pcp), workdir=workdir) as process:
        yield process


def _send(gateway: GatewayProcess, thread: str, messages: list[Message]) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-scaffold", max_retries=0, default_headers={"X-PCP-Thread": thread})
    client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]


def _pages(gateway: GatewayProcess, thread: str) -> str:
    response = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-scaffold"}, timeout=10)
    return response.text


def test_scaffolding_is_sent_verbatim_in_its_place_and_never_paged(gateway: GatewayProcess, upstream: FakeUpstream) -> None:
    thread = "t-" + uuid.uuid4().hex[:12]
    system = {"role": "system", "content": "Act as an expert software developer."}
    done: list[Message] = []
    for n in range(1, 7):
        # like aider after an edit: earlier exchanges, then the current file block, then the latest exchange
        messages = [system, *EXAMPLES, *REPO, *done, *files(n), *exchange(n)[:1]]
        _send(gateway, thread, messages)
        sent = upstream.chat_requests[-1].body
        assert sent is not None
        out = sent["messages"]
        assert out[1 : 1 + len(EXAMPLES) + len(REPO)] == EXAMPLES + REPO  # the preamble and the repo map lead, verbatim
        assert out[-3:] == [*files(n), exchange(n)[0]]  # the current file block, in its place before the live turn
        assert sum("added these files" in str(m["content"]) for m in out) == 1  # the old versions never show
        assert "get_factorial" not in out[0]["content"] and "added these files" not in out[0]["content"]
        done += exchange(n)
    assert "Turn 1:" in out[0]["content"] and not any("Turn 1:" in str(m["content"]) for m in out[1:])  # paged
    pages = _pages(gateway, thread)
    assert "Turn 4:" in pages
    assert not any(mark in pages for mark in ("get_factorial", "switched to a new code base", "summaries of some files", "added these files"))


def test_save_stores_no_scaffolding(gateway: GatewayProcess, upstream: FakeUpstream) -> None:
    thread = "t-" + uuid.uuid4().hex[:12]
    _send(gateway, thread, [*EXAMPLES, *REPO, *exchange(1), *files(1), {"role": "user", "content": "/save"}])
    pages = _pages(gateway, thread)
    assert "Turn 1:" in pages and "get_factorial" not in pages and "added these files" not in pages
    assert upstream.chat_requests == []  # /save is answered by the gateway itself


def test_without_markers_the_layout_finds_the_scaffolding_from_the_second_request_on(
    fake: FakeUpstream, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workdir = tmp_path_factory.mktemp("no-pins")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": BUDGET, "recent_turns": 1, "consolidation": False,
                                                           "profiles": {"aider": False}})
    thread = "t-" + uuid.uuid4().hex[:12]
    system = {"role": "system", "content": "Act as an expert software developer."}
    done: list[Message] = []
    with GatewayProcess(config=config, workdir=workdir) as plain:
        for n in range(1, 7):
            _send(plain, thread, [system, *EXAMPLES, *REPO, *done, *files(n), *exchange(n)[:1]])
            sent = upstream.chat_requests[-1].body
            assert sent is not None
            out = sent["messages"]
            if n == 1:  # nothing to compare with yet: an imported history would look the same
                assert "get_factorial" in _pages(plain, thread)
                done += exchange(n)
                continue
            assert out[1 : 1 + len(EXAMPLES) + len(REPO)] == EXAMPLES + REPO
            assert out[-3:] == [*files(n), exchange(n)[0]]  # the current file block, once, in its place
            assert sum("added these files" in str(m["content"]) for m in out) == 1  # the old versions never show
            assert "get_factorial" not in out[0]["content"] and "added these files" not in out[0]["content"]
            done += exchange(n)
        assert "Turn 1:" in out[0]["content"] and not any("Turn 1:" in str(m["content"]) for m in out[1:])  # paged
