"""A thread sent raw gets no embedding of its new exchanges before the answer (issue 47 item 3): the pages are stored
with their vector fields pending, and the thread's consolidation job makes the vectors afterwards — queued in the Redis
stream with them once the thread is within an exchange of its budget (made here by a gateway started after the first
stopped, as after a crash, since the first runs no worker), else by the idle flush when the thread goes quiet. A thread sent
paged still has its vectors when the answer comes, unless the request brought more new pages than `pcp.inline_vectors`
(a long history sent at once): those wait for the job too. Without consolidation no job would ever make them, so
nothing waits."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import redis

from gateway.adapters.embedding_models import DEFAULT_MODEL
from gateway.core import TokenCounter
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway_process import GatewayProcess, gateway_config

KEY = "sk-deferred"
BUDGET = 700


def chat(exchanges: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"Tell me fact number {i} about lighthouses."})
        messages.append({"role": "assistant", "content": f"Fact {i}: lighthouse {i} stands {20 + i} metres tall."})
    return [*messages, {"role": "user", "content": "Which one is the tallest?"}]


def store_of(config: dict[str, Any], data: Path) -> redis.Redis:
    url = config["store"].get("redis_url")
    if url:
        return redis.Redis.from_url(url, decode_responses=True)
    return redis.Redis(unix_socket_path=str(data / "redis.sock"), decode_responses=True)


def vectors(client: redis.Redis, prefix: str, thread: str) -> dict[str, str]:
    keys = list(client.scan_iter(match=f"{prefix}:*:{thread}}}:vector"))
    assert len(keys) == 1, keys
    return client.hgetall(keys[0])


def page_fields(stored: dict[str, str]) -> list[str]:
    """A thread's vector hash's page vectors (not its records, ``@model``, nor the user's and sentence vectors)."""
    return [f for f in stored if not f.startswith("@") and ":" not in f]


def all_made(stored: dict[str, str], pages: int) -> bool:
    """Whether the thread has ``pages`` page vectors and nothing pending."""
    return len(page_fields(stored)) == pages and not any(v.startswith("pending") for v in stored.values())


def made(stored: dict[str, str], pages: list[str]) -> bool:
    """Whether the vectors of ``pages`` are made and nothing of the thread is pending (other pages may have joined)."""
    return all(f in stored for f in pages) and not any(v.startswith("pending") for v in stored.values())


def ask(gateway: GatewayProcess, thread: str, messages: list[dict[str, Any]]) -> httpx.Headers:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, default_headers={"X-PCP-Thread": thread})
    response = client.chat.completions.with_raw_response.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    return response.headers


def drained(gateway: GatewayProcess, thread: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        r = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": f"Bearer {KEY}"})
        if r.status_code == 200 and not r.json().get("pending_jobs"):
            return
        time.sleep(0.1)  # polling another process's queue
    raise AssertionError("the thread's background work did not drain")


@pytest.fixture()
def setting(fake: FakeUpstream, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    config = gateway_config(fake.url, tmp_path / "data", pcp={"raw_form": True, "budget_tokens": BUDGET},
                            jobs={"workers": 0})
    return config, tmp_path


def pending_jobs(gateway: GatewayProcess, thread: str) -> int:
    r = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200, r.text
    return int(r.json()["pending_jobs"])


def test_a_raw_thread_within_an_exchange_of_its_budget_has_its_vectors_made_after_the_answer_by_the_job_queue(
    setting: tuple[dict[str, Any], Path], upstream: FakeUpstream
) -> None:
    config, workdir = setting
    thread = f"deferred-{uuid.uuid4().hex[:8]}"
    prefix = config["store"]["key_prefix"]
    # a last exchange long enough that one more like it would not fit the budget raw: the thread nears its budget
    told = "Fact 2: lighthouse 2 stands 22 metres tall. " + " ".join(f"Its keeper logged storm {n} in the book." for n in range(34))
    messages = [*chat(3)[:-2], {"role": "user", "content": "Tell me fact number 2 about lighthouses."},
                {"role": "assistant", "content": told}, {"role": "user", "content": "Which one is the tallest?"}]
    raw = TokenCounter.for_model("fake-model").count_messages(messages)
    assert raw <= BUDGET < raw + TokenCounter().count(told)
    upstream.script(Reply(content="lighthouse 2"))
    with GatewayProcess(config=config, workdir=workdir) as first:
        assert ask(first, thread, messages)["x-pcp-form"] == "raw"
        stored = vectors(store_of(config, workdir / "data"), prefix, thread)
        pages = page_fields(stored)
        assert len(pages) == 3 and all(stored[f] == "pending|" for f in pages), {k: v[:20] for k, v in stored.items()}
        assert stored["@model"].startswith("pending:")
        assert pending_jobs(first, thread) == 1  # queued with the pages; this gateway runs no worker
    # the job stayed in the stream: a gateway that runs a worker (as after a crash of the first) makes the vectors
    again = {**config, "jobs": {"workers": 1}}
    with GatewayProcess(config=again, workdir=workdir) as second:
        drained(second, thread)
        stored = vectors(store_of(config, workdir / "data"), prefix, thread)
    assert all_made(stored, 3)
    assert stored["@model"] == DEFAULT_MODEL


def test_a_raw_thread_far_from_its_budget_queues_nothing_and_is_embedded_when_it_goes_quiet(
    setting: tuple[dict[str, Any], Path], upstream: FakeUpstream
) -> None:
    """Most threads never outgrow the budget: nothing compares their vectors, so no job is queued for them until
    the thread comes within an exchange of its budget or goes quiet. The idle flush finds a quiet thread in the
    registry kept in Redis, so the vectors are made after a restart too."""
    config, workdir = setting
    thread = f"far-{uuid.uuid4().hex[:8]}"
    prefix = config["store"]["key_prefix"]
    upstream.script(Reply(content="lighthouse 2"), Reply(content="lighthouse 3"))
    with GatewayProcess(config=config, workdir=workdir) as first:
        assert ask(first, thread, chat(3))["x-pcp-form"] == "raw"
        following = [*chat(3)[:-1], {"role": "assistant", "content": "Lighthouse 2."}, {"role": "user", "content": "And the oldest?"}]
        assert ask(first, thread, following)["x-pcp-form"] == "raw"
        assert pending_jobs(first, thread) == 0
        stored = vectors(store_of(config, workdir / "data"), prefix, thread)
        pending = page_fields(stored)
        assert len(pending) == 4 and all(stored[f] == "pending|" for f in pending)
    # quiet for longer than the idle limit (here 0.6 s): the scan a gateway runs when it starts queues its flush
    time.sleep(1.0)
    quiet = {**config, "jobs": {"workers": 1}, "pcp": {**config["pcp"], "idle_flush_minutes": 0.01}}
    with GatewayProcess(config=quiet, workdir=workdir) as second:
        deadline = time.monotonic() + 120
        # the four pages' vectors made and nothing pending (the flush may also freeze them into a topic, whose own
        # vector then joins them: a count of page vectors would see four only between the two)
        while not made(stored := vectors(store_of(config, workdir / "data"), prefix, thread), pending):
            assert time.monotonic() < deadline, "the quiet thread's vectors were not made"
            time.sleep(0.1)  # polling another process's background work
        drained(second, thread)
    assert stored["@model"] == DEFAULT_MODEL


def test_a_paged_thread_s_vectors_are_there_with_the_answer(setting: tuple[dict[str, Any], Path], upstream: FakeUpstream) -> None:
    config, workdir = setting
    thread = f"paged-{uuid.uuid4().hex[:8]}"
    upstream.script(Reply(content="lighthouse 40"))
    with GatewayProcess(config=config, workdir=workdir) as gateway:
        assert ask(gateway, thread, chat(40))["x-pcp-form"] == "paged"
        stored = vectors(store_of(config, workdir / "data"), config["store"]["key_prefix"], thread)
    assert all_made(stored, 40)


def test_a_long_history_sent_at_once_is_answered_before_its_vectors_are_made(
    setting: tuple[dict[str, Any], Path], upstream: FakeUpstream
) -> None:
    config, workdir = setting
    config = {**config, "pcp": {**config["pcp"], "inline_vectors": 30}}
    thread = f"bulk-{uuid.uuid4().hex[:8]}"
    prefix = config["store"]["key_prefix"]
    upstream.script(Reply(content="lighthouse 40"), Reply(content="lighthouse 40"))
    with GatewayProcess(config=config, workdir=workdir) as first:
        assert ask(first, thread, chat(40))["x-pcp-form"] == "paged"  # ranked by the pages' words alone
        stored = vectors(store_of(config, workdir / "data"), prefix, thread)
        pages = page_fields(stored)
        assert len(pages) == 40 and all(stored[f] == "pending|" for f in pages)
    again = {**config, "jobs": {"workers": 1}}
    with GatewayProcess(config=again, workdir=workdir) as second:
        drained(second, thread)
        stored = vectors(store_of(config, workdir / "data"), prefix, thread)
        assert not any(v.startswith("pending") for v in stored.values()) and stored["@model"] == DEFAULT_MODEL
        # the next exchange is one new page: embedded with its answer
        following = [*chat(40)[:-1], {"role": "assistant", "content": "Lighthouse 40 is the tallest."},
                     {"role": "user", "content": "And the shortest?"}]
        assert ask(second, thread, following)["x-pcp-form"] == "paged"
        stored = vectors(store_of(config, workdir / "data"), prefix, thread)
    assert all_made(stored, 41)


def test_without_consolidation_no_vector_waits_for_a_job_that_never_runs(
    setting: tuple[dict[str, Any], Path], upstream: FakeUpstream
) -> None:
    config, workdir = setting
    config = {**config, "pcp": {**config["pcp"], "consolidation": False, "inline_vectors": 0}}
    thread = f"no-jobs-{uuid.uuid4().hex[:8]}"
    upstream.script(Reply(content="lighthouse 2"))
    with GatewayProcess(config=config, workdir=workdir) as gateway:
        assert ask(gateway, thread, chat(3))["x-pcp-form"] == "raw"
        stored = vectors(store_of(config, workdir / "data"), config["store"]["key_prefix"], thread)
    assert all_made(stored, 3)
