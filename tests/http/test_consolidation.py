"""The consolidator end to end: real embeddings, Redis Streams jobs, a scripted summarizer, the inspection API."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from lxml import etree

from gateway.core import TokenCounter
from gateway.core.blocks import split_blocks
from gateway.core.pages import page_id

from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, Response, Slow, ToolCall
from tests.support.gateway_process import ROOT, GatewayProcess, gateway_config
from tests.support.topic_styles import GUITAR, MOVING
from tests.support.topics import BICYCLE, OTHER_TOPICS, TOPICS, chat_messages

SOURDOUGH = [
    "How do I keep my sourdough starter alive while I travel for two weeks?",
    "My sourdough starter smells like acetone, is the sourdough starter dying?",
    "How often should I feed a sourdough starter kept in the fridge?",
    "Can I use whole wheat flour to feed my sourdough starter?",
]
ASYNCIO = [
    "Why does my Python asyncio event loop block when I call requests.get?",
    "How do I run blocking code inside a Python asyncio event loop without freezing it?",
    "What is the difference between asyncio.gather and asyncio.wait in Python?",
    "How do I cancel a Python asyncio task cleanly on shutdown?",
]
MARATHON = [
    "How should I structure my marathon training plan for a first marathon?",
    "How long should the long run be in week ten of marathon training?",
    "What should I eat the night before my marathon race?",
    "How do I taper in the last three weeks before a marathon?",
]
KEY = "sk-consolidation"
PCP = {"recent_turns": 1, "merge_interval_hours": 1000}


def exchanges(questions: list[str], reply: str = "Here is a careful answer about that.") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for question in questions:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": f"{reply} ({question[:30]})"}]
    return messages


def client(gateway: GatewayProcess, thread: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, default_headers={"X-PCP-Thread": thread, **headers})


def inspect(gateway: GatewayProcess, thread: str) -> dict[str, Any]:
    response = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def settled(gateway: GatewayProcess, thread: str, timeout: float = 90.0) -> dict[str, Any]:
    """The thread once its background work is done."""
    deadline = time.monotonic() + timeout
    while True:
        data = inspect(gateway, thread)
        if data["pending_jobs"] == 0:
            return data
        assert time.monotonic() < deadline, f"background work did not finish: {data['pending_jobs']} jobs pending"
        time.sleep(0.2)


def children_text(node: dict[str, Any]) -> str:
    return " ".join(c["summary"] for c in node.get("children", []))


@pytest.fixture(scope="module", params=["extractive", "summarizer"])
def consolidating(request: pytest.FixtureRequest, fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("consolidating")
    pcp = {**PCP, "max_rounds": 6} | ({"summarizer_model": "summarizer"} if request.param == "summarizer" else {})
    config = gateway_config(fake.url, workdir / "data", pcp=pcp)
    config["model_list"].append({"model_name": "summarizer", "litellm_params": {"model": "openai/summarizer", "api_base": fake.url, "api_key": "k"}})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def test_three_topics_become_three_containers(consolidating: GatewayProcess, upstream: FakeUpstream) -> None:
    thread = "topics-" + uuid.uuid4().hex[:8]
    scripted = "summarizer" in consolidating.config["pcp"].get("summarizer_model", "")
    summarizer = Summarizer()
    if scripted:
        upstream.script(*[summarizer] * 15)  # 12 manifests, 3 containers
    messages = exchanges(SOURDOUGH) + exchanges(ASYNCIO) + exchanges(MARATHON) + [{"role": "user", "content": "/save"}]
    reply = client(consolidating, thread).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    assert "consolidated" in (reply.choices[0].message.content or "")
    data = settled(consolidating, thread)
    assert data["total_pages"] == 12 + 3 and data["consolidated_pages"] == 3
    roots = data["pages"]
    assert [r["type"] for r in roots] == ["Consolidated"] * 3
    for root, topic in zip(roots, (SOURDOUGH, ASYNCIO, MARATHON)):
        assert len(root["children"]) == 4
        if scripted:  # the manifests come from the summarizer
            assert all(c["summary"].startswith("MANIFEST ") for c in root["children"])
        else:
            assert all(q in children_text(root) for q in topic)  # extractive summaries
    if scripted:
        assert sorted(r["summary"] for r in roots) == ["RUNNING SUMMARY 1", "RUNNING SUMMARY 2", "RUNNING SUMMARY 3"]
        assert len(summarizer.consolidations) == 3
        for text, topic in zip(summarizer.consolidations, (SOURDOUGH, ASYNCIO, MARATHON)):
            assert all(q in text for q in topic)  # each container was summarized from its own topic's pages
    assert [r for r in upstream.chat_requests if (r.body or {}).get("model") != "summarizer"] == []  # /save never calls the chat model

    # from now on the context shows each container's pages one by one, as lines or nodes of their own (the
    # budget spends what is left on the pages that match best, in Detail, rather than on the rest's lines)
    upstream.script(Reply(content="ok"))
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=[*messages[:-1], {"role": "assistant", "content": "Saved."}, {"role": "user", "content": "What about the taper?"}])  # type: ignore[arg-type]
    text = upstream.chat_requests[-1].body["messages"][0]["content"]  # type: ignore[index]
    root = etree.fromstring(text[text.index("<PagedContext") :].encode())
    flow = root.find("Linear_Flow")
    lines = set(re.findall(r"^\[([0-9a-f]+)\] ", root.findtext("Background_Context") or "", re.MULTILINE))
    shown = {n.get("id") for n in flow} | lines  # as a node, or as a line or an excerpt in Background_Context
    assert all({c["id"] for c in r["children"]} & shown for r in roots)
    assert len({c["id"] for r in roots for c in r["children"]} & shown) >= 10
    assert not any(n.get("view") == "Unpacked" for n in flow)  # the pages come one by one, not inside their container


def test_a_chat_of_short_messages_freezes_at_the_exchanges_where_its_topics_change(
    consolidating: GatewayProcess, upstream: FakeUpstream
) -> None:
    thread = "short-topics-" + uuid.uuid4().hex[:8]
    if "summarizer" in consolidating.config["pcp"].get("summarizer_model", ""):
        upstream.script(*[Summarizer()] * 21)  # 18 manifests, 3 containers
    messages = chat_messages(*TOPICS)
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=[*messages, {"role": "user", "content": "/save"}])  # type: ignore[arg-type]
    data = settled(consolidating, thread)
    pages = [page_id(block.text) for block in split_blocks(messages).blocks]
    expected = [pages[0:6], pages[6:12], pages[12:18]]
    assert [[c["id"] for c in root.get("children", [])] for root in data["pages"]] == expected, json.dumps(data)[:3000]


def test_a_chat_lived_exchange_by_exchange_freezes_one_container_per_topic(consolidating: GatewayProcess, upstream: FakeUpstream) -> None:
    # as a client sends it: each request the whole history and the next question, ten minutes after the last, the
    # model's short reply coming back; the pages are stored one request later, and segmented while the chat goes
    # on. A bicycle, a first guitar, a move: the fixed cosine bar froze this chat into six runs, the move's first
    # exchange in the guitar's
    thread = "lived-" + uuid.uuid4().hex[:8]
    topics = (BICYCLE, GUITAR, MOVING)
    asked = [q for topic in topics for q, _ in topic]
    replies = [r for topic in topics for _, r in topic]
    reply_to = dict(zip(asked, replies))  # to the live question, the last user message however the history is sent
    summarizer = Summarizer()

    def model(recorded: Recorded) -> Response:
        body = recorded.body or {}
        if body.get("model") == "summarizer":
            return summarizer(recorded)
        return Reply(content=reply_to[next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")])

    upstream.script(*[model] * 200)  # 18 turns, and for the summarizer 18 manifests, 3 containers
    start = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)  # ahead of the idle scan's clock
    history: list[dict[str, Any]] = []
    for n, question in enumerate([*asked, "/save"]):
        when = {"X-PCP-Time": (start + timedelta(minutes=10 * n)).isoformat()}
        messages = [*history, {"role": "user", "content": question}]
        reply = client(consolidating, thread, **when).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        history = [*messages, {"role": "assistant", "content": reply.choices[0].message.content or ""}]
    assert [m["content"] for m in history[1:-2:2]] == replies  # the client heard what the script answers
    data = settled(consolidating, thread)
    pages = [page_id(block.text) for block in split_blocks(chat_messages(*topics)).blocks]
    roots = data["pages"]
    assert [r["type"] for r in roots] == ["Consolidated"] * 3, json.dumps(data)[:3000]
    assert [[c["id"] for c in root["children"]] for root in roots] == [pages[0:6], pages[6:12], pages[12:18]]
    assert [root["timestamp"] for root in roots] == sorted(root["timestamp"] for root in roots)


def test_a_topic_left_out_is_offered_by_its_map_entry_and_consulting_it_gets_its_pages(
    consolidating: GatewayProcess, upstream: FakeUpstream
) -> None:
    # 18 exchanges frozen into three topics, a question at 300 tokens: too little for more than a page; each topic is
    # offered a map entry (its id and a few words), weighed like a line of its size, and a Consult of one opens it
    thread = "map-" + uuid.uuid4().hex[:8]
    scripted = "summarizer" in consolidating.config["pcp"].get("summarizer_model", "")
    if scripted:
        upstream.script(*[Summarizer()] * 21)
    messages = [*chat_messages(*TOPICS), {"role": "user", "content": "/save"}]
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    roots = settled(consolidating, thread)["pages"]
    assert [r["type"] for r in roots] == ["Consolidated"] * 3
    question = [*messages, {"role": "assistant", "content": "Saved."}, {"role": "user", "content": "What did you say about my chain?"}]

    def named(budget: int) -> tuple[str, set[str]]:
        upstream.script(Reply(content="ok"))
        raw = client(consolidating, thread, **{"X-PCP-Budget": str(budget)}).chat.completions.with_raw_response.create(model="fake-model", messages=question)  # type: ignore[arg-type]
        assert int(raw.headers["x-pcp-prompt-tokens"]) <= budget
        text = upstream.chat_requests[-1].body["messages"][0]["content"]  # type: ignore[index]
        return text, set(re.findall(r"^\[([0-9a-f]+)\] ", text, re.MULTILINE)) | set(re.findall(r'<Node id="([0-9a-f]+)"', text))

    text, ids = named(300)
    bikes = roots[1]
    assert bikes["id"] in ids or {c["id"] for c in bikes["children"]} & ids, text  # the topic asked about
    text, ids = named(1000)
    for root in roots:  # with room for pages, every topic is named by one, or the turn the question follows
        assert root["id"] in ids or {c["id"] for c in root["children"]} & ids or root is roots[2], text
    # the model consults a topic by its id: the tool result holds that topic's exchanges (a summarizer's short account
    # opens first in Detail, as any container's: consulted again, the container opens on its pages)
    topic = roots[0]
    children = [c["id"] for c in topic["children"]]
    consult = ToolCall("pcp_consult", json.dumps({"reason": "that topic", "ids": [topic["id"]]}))
    upstream.script(*[Reply(content=None, tool_calls=[consult])] * 2, Reply(content="done"))
    reply = client(consolidating, thread, **{"X-PCP-Budget": "300"}).chat.completions.create(model="fake-model", messages=question)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "done"
    results = [m["content"] for m in upstream.chat_requests[-1].body["messages"] if m["role"] == "tool"]  # type: ignore[index]
    pages = next((r for r in results if sum(child in r for child in children) >= len(children) // 2), None)
    assert pages is not None, results
    assert scripted or pages == results[0]  # the extractive account holds the exchanges: it opens on them at once


def test_four_topics_are_gathered_into_a_chapter_that_the_map_names_and_a_consult_opens(
    consolidating: GatewayProcess, upstream: FakeUpstream
) -> None:
    # six topics: the oldest four become a chapter, so the top level (what the map offers) is three containers, not
    # six; consulted, the chapter shows its table of contents, each topic one Consult away
    thread = "chapters-" + uuid.uuid4().hex[:8]
    if "summarizer" in consolidating.config["pcp"].get("summarizer_model", ""):
        upstream.script(*[Summarizer()] * 42)  # 36 manifests, 6 containers (a chapter asks no one)
    messages = [*chat_messages(*TOPICS, *OTHER_TOPICS), {"role": "user", "content": "/save"}]
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    data = settled(consolidating, thread)
    roots = data["pages"]
    assert [len(r["children"]) for r in roots] == [4, 6, 6] and data["consolidated_pages"] == 7, json.dumps(data)[:3000]
    chapter, topics = roots[0], roots[0]["children"]
    assert [len(t["children"]) for t in topics] == [6, 6, 6, 6]
    question = [*messages, {"role": "assistant", "content": "Saved."}, {"role": "user", "content": "Is a cooling pad worth it?"}]
    # a page of one of its topics shown names that topic, not the chapter's others: the chapter's entry stays
    upstream.script(Reply(content="ok"))
    asked = [*question[:-1], {"role": "user", "content": "What did you say about my chain?"}]
    client(consolidating, thread, **{"X-PCP-Budget": "1500"}).chat.completions.create(model="fake-model", messages=asked)  # type: ignore[arg-type]
    shown = upstream.chat_requests[-1].body["messages"][0]["content"]  # type: ignore[index]
    bikes = next(t for t in topics if "chain" in children_text(t))
    assert any(f"[{c['id']}]" in shown or f'id="{c["id"]}"' in shown for c in bikes["children"]), shown
    assert f"[{chapter['id']}]" in shown, shown
    consult = ToolCall("pcp_consult", json.dumps({"reason": "older topics", "ids": [chapter["id"]]}))
    upstream.script(Reply(content=None, tool_calls=[consult]), Reply(content="done"))
    reply = client(consolidating, thread, **{"X-PCP-Budget": "400"}).chat.completions.create(model="fake-model", messages=question)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "done"
    first, second = [r.body or {} for r in upstream.chat_requests if (r.body or {}).get("model") == "fake-model"][-2:]
    tool = next(m for m in second["messages"] if m["role"] == "tool")["content"]
    assert all(f"[{t['id']}]" in tool for t in topics), tool  # its table of contents: each topic by its id
    assert counter_of(second) < counter_of(first) + 400  # the digest, not the topics' text


def test_a_topic_whose_last_reply_grew_after_it_was_frozen_is_still_this_history_s(
    consolidating: GatewayProcess, upstream: FakeUpstream
) -> None:
    # the frozen topic's last exchange was stored as it stood ([question, reply]); the next request carries it with
    # one more reply (a chat where one side writes again the next day): the stored page is that block's beginning,
    # not another branch, so the topic still stands for its exchanges and the map names it
    thread = "grown-" + uuid.uuid4().hex[:8]
    summarizer = Summarizer()
    replies: list[Response] = []

    def model(recorded: Recorded) -> Response:  # the later request's new pages get manifests while it is answered
        return summarizer(recorded) if (recorded.body or {}).get("model") == "summarizer" else replies.pop(0)

    upstream.script(*[model] * 40)
    messages = exchanges(SOURDOUGH) + exchanges(ASYNCIO) + exchanges(MARATHON)
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=[*messages, {"role": "user", "content": "/save"}])  # type: ignore[arg-type]
    roots = settled(consolidating, thread)["pages"]
    assert [r["type"] for r in roots] == ["Consolidated"] * 3
    grown = [*messages, {"role": "assistant", "content": "One more thing about the taper: keep the intensity."}]
    later = exchanges(["Which running shoes suit a marathon beginner?", "How many rest days a week should I take?"])
    question = [*grown, *later, {"role": "user", "content": "Which flour did I ask about for feeding?"}]
    consult = ToolCall("pcp_consult", json.dumps({"reason": "the marathon", "ids": [roots[2]["id"]]}))
    replies.extend([Reply(content=None, tool_calls=[consult]), Reply(content="done")])
    client(consolidating, thread, **{"X-PCP-Budget": "400"}).chat.completions.create(model="fake-model", messages=question)  # type: ignore[arg-type]
    asked = [r.body or {} for r in upstream.chat_requests if (r.body or {}).get("model") == "fake-model"]
    tool = next(m for m in asked[-1]["messages"] if m["role"] == "tool")["content"]
    assert f'<Node id="{roots[2]["id"]}"' in tool, tool  # the marathon topic's container stands: its id opens it


def counter_of(body: dict[str, Any]) -> int:
    return TokenCounter().count_messages(body["messages"])


def _page_id(text: str, needle: str) -> str:
    """The id of the node or Background_Context line that shows ``needle``."""
    for line in text.split("\n"):
        if needle in line:
            found = re.search(r'^\[([0-9a-f]+)\] |<Node id="([0-9a-f]+)"', line)
            if found:
                return found.group(1) or found.group(2)
    node = next(n for n in etree.fromstring(text[text.index("<PagedContext") :].encode()).iter("Node") if needle in "".join(n.itertext()))
    return str(node.get("id"))


def test_a_question_about_one_exchange_of_a_topic_gets_that_exchange_and_consulting_it_opens_the_topic(
    consolidating: GatewayProcess, upstream: FakeUpstream
) -> None:
    thread = "one-of-a-topic-" + uuid.uuid4().hex[:8]
    if "summarizer" in consolidating.config["pcp"].get("summarizer_model", ""):
        upstream.script(*[Summarizer()] * 15)
    messages = exchanges(SOURDOUGH) + exchanges(ASYNCIO) + exchanges(MARATHON) + [{"role": "user", "content": "/save"}]
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    assert settled(consolidating, thread)["consolidated_pages"] == 3
    question = [*messages[:-1], {"role": "user", "content": "Which flour did I ask about for feeding?"}]  # nothing new to store

    # the context without any page: what the budget cannot take away
    upstream.script(Reply(content="ok"))
    raw = client(consolidating, thread, **{"X-PCP-Budget": "1"}).chat.completions.with_raw_response.create(model="fake-model", messages=question)  # type: ignore[arg-type]
    fixed = int(raw.headers["x-pcp-prompt-tokens"])

    # room for about two pages: the flour exchange is there, verbatim, without the rest of its topic
    wanted = SOURDOUGH[3]
    opened: list[str] = []

    def consult_the_flour_page(recorded: Recorded) -> Response:
        system = (recorded.body or {})["messages"][0]["content"]
        if wanted not in system:
            return Reply(content="not shown")
        opened.append(_page_id(system, wanted))
        return Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "read it", "ids": opened}))])

    upstream.script(consult_the_flour_page, Reply(content="whole wheat"))
    budget = {"X-PCP-Budget": str(fixed + 120)}
    reply = client(consolidating, thread, **budget).chat.completions.create(model="fake-model", messages=question)  # type: ignore[arg-type]
    first, second = [r.body or {} for r in upstream.chat_requests if (r.body or {}).get("model") == "fake-model"][-2:]
    system = first["messages"][0]["content"]
    assert reply.choices[0].message.content == "whole wheat", system
    assert sum(q in system for q in SOURDOUGH) <= 2 and not re.search(r'<Node [^>]*type="Consolidated"', system), system
    tool = next(m for m in second["messages"] if m["role"] == "tool")
    container = next(r for r in settled(consolidating, thread)["pages"] if opened[0] in [c["id"] for c in r["children"]])
    # the page is in Detail and its container was opened on the way, as for any page inside a container
    assert f"unpacked {container['id']}" in tool["content"] and f'id="{opened[0]}" type="Original" view="Detail"' in tool["content"]
    views = settled(consolidating, thread)["views"]
    assert views.get(container["id"]) == "Unpacked" and views.get(opened[0]) == "Detail"


def test_consulting_a_long_topic_at_a_small_budget_opens_it_in_part_within_the_budget(
    consolidating: GatewayProcess, upstream: FakeUpstream
) -> None:
    if "summarizer" in consolidating.config["pcp"].get("summarizer_model", ""):
        pytest.skip("a summarizer's consolidated account is short; the extractive one keeps every exchange")
    thread = "long-topic-" + uuid.uuid4().hex[:8]
    reply = ("Keep the starter at room temperature and feed it flour and water in equal weights every day; "
             "discard half before each feeding so the jar does not overflow and the acidity stays balanced. ") * 3
    questions = [f"How should I look after my sourdough starter on day {day} of the first month?" for day in range(1, 31)]
    questions[20] = "What temperature should the sourdough starter sit at when the kitchen is cold in winter?"
    messages = exchanges(questions, reply) + [{"role": "user", "content": "/save"}]
    client(consolidating, thread).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    data = settled(consolidating, thread)
    container = max(data["pages"], key=lambda root: len(root.get("children", [])))
    assert len(container["children"]) >= 20, json.dumps(data)[:2000]
    later = exchanges(["Which running shoes suit a marathon beginner?", "How many rest days a week should I take?"])
    question = [*messages[:-1], *later, {"role": "user", "content": "What did you say about a cold kitchen in winter?"}]
    budget = 1000

    def consult_the_container(recorded: Recorded) -> Response:
        return Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "the cold kitchen", "ids": [container["id"]]}))])

    upstream.script(consult_the_container, Reply(content="keep it warm"))
    raw = client(consolidating, thread, **{"X-PCP-Budget": str(budget)}).chat.completions.with_raw_response.create(model="fake-model", messages=question)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "keep it warm"
    first, second = [r.body or {} for r in upstream.chat_requests if (r.body or {}).get("model") == "fake-model"][-2:]
    counter = TokenCounter()
    assert counter.count_messages(first["messages"]) <= budget
    tool = next(m for m in second["messages"] if m["role"] == "tool")["content"]
    shown = re.findall(r'<Node id="([0-9a-f]+)" type="Original" view="Summary"', tool)
    listed = re.findall(r"^\[([0-9a-f]+)\]", tool, re.M)
    children = [c["id"] for c in container["children"]]
    # the exchange the question is about is shown and every other one is a Consult away; the round goes beyond the
    # budget by the call, its answer's lines and one child's node (opened whole, the topic was over four budgets)
    winter = next(c["id"] for c in container["children"] if "cold in winter" in c["summary"])
    assert winter in shown and sorted(shown + listed) == sorted(children), tool
    one_child = max(counter.count(m.group(0)) for m in re.finditer(r'<Node id="[0-9a-f]+" type="Original".*?</Node>', tool, re.S))
    assert counter.count_messages(second["messages"]) <= budget + one_child + 10 * len(children) + 150, tool
    assert container["tokens"] > 4 * budget


def _zoom_to_an_original(start: str) -> Callable[[Recorded], Response]:
    """Consult the container `start` (shown as a node or as a line), then the first node of each tool result
    that can go deeper, until an Original page is in Detail; then answer."""

    def respond(recorded: Recorded) -> Response:
        body = recorded.body or {}
        results = [m["content"] for m in body.get("messages", []) if m.get("role") == "tool"]
        if results and 'type="Original" view="Detail"' in results[-1]:
            return Reply(content="found it")
        target = start
        if results:
            xml = etree.fromstring(results[-1][results[-1].index("<Node") :].encode())
            target = next(n for n in xml.iter("Node") if n.get("view") != "Unpacked").get("id")
        return Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "go deeper", "ids": [target]}))])

    return respond


def test_merging_stale_containers_and_zooming_through_two_levels(fake: FakeUpstream, tmp_path: Path, upstream: FakeUpstream) -> None:
    config = gateway_config(
        fake.url, tmp_path / "data",
        pcp={**PCP, "max_rounds": 8, "max_processing_tokens": 400, "merge_staleness_hours": 1, "merge_interval_hours": 0.0005},
    )  # fmt: skip
    thread = "merge-" + uuid.uuid4().hex[:8]
    long_reply = "A long, careful answer about sourdough starters, feeding, flour and temperature. " * 6
    questions = [f"{q} (day {day})" for day in (1, 2) for q in SOURDOUGH]  # eight pages: two relays before /save
    messages = exchanges(questions, reply=long_reply) + [{"role": "user", "content": "/save"}]
    with GatewayProcess(config=config, workdir=tmp_path) as gateway:
        two_days_ago = "2026-01-01T10:00:00Z"  # logical time: these pages are stale for the merge
        saved = client(gateway, thread, **{"X-PCP-Time": two_days_ago}).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
        # merges are due every 1.8 s here, more often than the scheduler's idle scan (a minute): it wakes for them
        deadline = time.monotonic() + 30
        while not any(c.get("children") and c["type"] == "Consolidated" and any(g["type"] == "Consolidated" for g in c["children"]) for c in settled(gateway, thread)["pages"]):
            assert time.monotonic() < deadline, f"no merge happened: {json.dumps(inspect(gateway, thread))[:2000]}"
            time.sleep(0.5)
        data = settled(gateway, thread)
        top = [p for p in data["pages"] if p["type"] == "Consolidated"]
        assert len(top) == 1 and all(c["type"] == "Consolidated" for c in top[0]["children"])

        upstream.script(*[_zoom_to_an_original(top[0]["id"])] * 8)
        # one more exchange after /save: the one the question follows is sent verbatim, and every page of the
        # merged topic is history (a container holding the verbatim exchange is not shown)
        after = [{"role": "assistant", "content": saved.choices[0].message.content}, {"role": "user", "content": "Thanks, that is all for the starter."},
                 {"role": "assistant", "content": "You're welcome."}]
        question = [*messages, *after, {"role": "user", "content": "What did I ask first?"}]
        raw = client(gateway, thread).chat.completions.with_raw_response.create(model="fake-model", messages=question)  # type: ignore[arg-type]
        assert raw.parse().choices[0].message.content == "found it"
        # Unpacked, child Detail, child Unpacked, original Detail, then the answer (the top may start in Detail)
        assert int(raw.headers["x-pcp-rounds"]) >= 5
        views = settled(gateway, thread)["views"]
        assert list(views.values()).count("Unpacked") >= 2 and "Detail" in views.values()


class Summarizer:
    """A scripted summarizer model: manifests for single pages, numbered running summaries for containers."""

    def __init__(self) -> None:
        self.consolidations: list[str] = []

    def __call__(self, recorded: Recorded) -> Response:
        body = recorded.body or {}
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if "manifest of one exchange" in system:
            return Reply(content=json.dumps({"summary": "MANIFEST " + user[-60:], "clusters": ["sourdough"]}))
        self.consolidations.append(user)
        number = len(self.consolidations)
        return Reply(content=json.dumps({"summary": f"RUNNING SUMMARY {number}", "content": f"Consolidated account {number}.", "clusters": ["sourdough"]}))


@pytest.mark.parametrize("consolidating", ["summarizer"], indirect=True)  # the module's summarizer gateway, not one more
def test_a_long_single_topic_run_relays_its_running_summary(consolidating: GatewayProcess, upstream: FakeUpstream) -> None:
    gateway = consolidating
    long_reply = "Feed the starter at a one to one to one ratio, keep it warm, discard half before feeding, and watch the rise. " * 30
    questions = [f"{q} (day {i})" for i in range(4) for q in SOURDOUGH]  # ~12k tokens of one topic
    thread = "relay-" + uuid.uuid4().hex[:8]
    summarizer = Summarizer()
    upstream.script(*[summarizer] * 64)
    client(gateway, thread).chat.completions.create(model="fake-model", messages=exchanges(questions, long_reply) + [{"role": "user", "content": "/save"}])  # type: ignore[arg-type]
    data = settled(gateway, thread)
    assert data["consolidated_pages"] >= 2 and len(summarizer.consolidations) >= 2
    assert not summarizer.consolidations[0].startswith("<earlier_in_this_topic>")
    assert summarizer.consolidations[1].startswith("<earlier_in_this_topic>\nRUNNING SUMMARY 1\n")
    assert [p["summary"] for p in data["pages"]][:2] == ["RUNNING SUMMARY 1", "RUNNING SUMMARY 2"]
    assert all(c["summary"].startswith("MANIFEST ") for p in data["pages"] for c in p["children"])


def _worker(config_path: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "gateway", "worker", "--config", str(config_path)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def test_a_killed_worker_s_job_is_finished_by_another_without_duplicates(fake: FakeUpstream, tmp_path: Path, upstream: FakeUpstream) -> None:
    config = gateway_config(fake.url, tmp_path / "data", pcp={**PCP, "summarizer_model": "summarizer"}, jobs={"workers": 0, "visibility_timeout_ms": 1500})
    config["model_list"].append({"model_name": "summarizer", "litellm_params": {"model": "openai/summarizer", "api_base": fake.url, "api_key": "k", "timeout": 120}})
    thread = "kill-" + uuid.uuid4().hex[:8]
    with GatewayProcess(config=config, workdir=tmp_path) as gateway:
        config_path = tmp_path / "config.yaml"
        assert yaml.safe_load(config_path.read_text())["jobs"]["workers"] == 0
        upstream.script(Slow(60.0, content="never delivered"))  # the first worker hangs in its first summarizer call
        first = _worker(config_path, tmp_path / "worker1.log")
        try:
            client(gateway, thread).chat.completions.create(model="fake-model", messages=exchanges(SOURDOUGH + ASYNCIO) + [{"role": "user", "content": "/save"}])  # type: ignore[arg-type]
            deadline = time.monotonic() + 60
            while not any(r.body and r.body.get("model") == "summarizer" for r in upstream.chat_requests):
                assert time.monotonic() < deadline and first.poll() is None, (tmp_path / "worker1.log").read_text()
                time.sleep(0.1)
            first.send_signal(signal.SIGKILL)
            first.wait()
        finally:
            if first.poll() is None:
                first.kill()
        upstream.reset()  # the second worker's summarizer fails fast: extractive fallback
        second = _worker(config_path, tmp_path / "worker2.log")
        try:
            data = settled(gateway, thread, timeout=90)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)
    assert data["consolidated_pages"] == 2, json.dumps(data)[:3000]
    ids = [c["id"] for p in data["pages"] for c in p.get("children", [])]
    assert len(ids) == len(set(ids)) == 8
