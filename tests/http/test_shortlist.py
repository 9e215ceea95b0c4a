"""The pages offered excerpts and Detail cover what the budget could show, not only `pcp.shortlist` of them.

A page outside that shortlist can only be a line: a burst of short messages is then its summary, and the fact
inside it is not shown. With a budget that can show several bursts' matching messages, every one of them is
excerpted, however small `pcp.shortlist` is.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from lxml import etree

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config

KEYS = ["blue flowerpot", "red mailbox", "green birdhouse", "yellow watering can"]


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("shortlist")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": 1200, "recent_turns": 2, "shortlist": 1})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def _burst(i: int, fact: str) -> list[dict[str, Any]]:
    """One exchange of many short messages on each side; the user's tenth holds ``fact``."""
    asks = [{"role": "user", "content": f"msg {i}.{k}: weeding the garden beds today, chore number {k} of many"} for k in range(20)]
    asks[10] = {"role": "user", "content": fact}
    replies = [{"role": "assistant", "content": f"reply {i}.{k}: on weeding, point {k} to keep in mind"} for k in range(20)]
    return [*asks, *replies]


def test_every_page_the_budget_can_show_is_offered_its_excerpts(gateway: GatewayProcess, upstream: FakeUpstream) -> None:
    facts = [f"by the way, spare key number {i} is hidden under the {key}" for i, key in enumerate(KEYS)]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i, fact in enumerate(facts):
        messages += _burst(i, fact)
    messages += [{"role": "user", "content": "Thanks, that is all for today."}, {"role": "assistant", "content": "Enjoy the garden."}]
    messages.append({"role": "user", "content": "Where is each spare key hidden?"})
    client = openai.OpenAI(base_url=gateway.base_url, api_key="k", max_retries=0, default_headers={"X-PCP-Thread": "t-" + uuid.uuid4().hex[:12]})
    client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    body = upstream.chat_requests[-1].body
    assert body is not None
    system = body["messages"][0]["content"]
    root = etree.fromstring(system[system.index("<PagedContext") :].encode())
    entries = re.split(r"\n(?=\[[0-9a-f]+\] )", root.findtext("Background_Context") or "")
    excerpted = [fact for fact in facts if any(fact in e and "…" in e for e in entries)]
    assert len(excerpted) >= 3, entries  # not only the one page `pcp.shortlist` names
