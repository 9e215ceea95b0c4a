"""`GET /metrics` and the per-request log line, from outside: a gateway with a master key logging JSON, driven
by the openai SDK; the metrics are parsed as Prometheus text and read before and after requests."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from lxml import etree
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, ToolCall
from tests.support.gateway_process import GatewayProcess, gateway_config

MASTER = "sk-master-" + uuid.uuid4().hex
ALICE = "sk-alice-" + uuid.uuid4().hex
SECRET = "the-secret-word-" + uuid.uuid4().hex[:8]  # in message content: must never reach the log


@pytest.fixture(scope="module")
def gw(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("observability")
    config = gateway_config(fake.url, workdir / "data", general_settings={"master_key": MASTER}, keys=[{"key": ALICE, "tenant": "alice"}])
    with GatewayProcess(config=config, workdir=workdir, args=("--log-format", "json")) as process:
        yield process


def scrape(gw: GatewayProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    response = httpx.get(gw.root_url + "/metrics", headers={"authorization": f"Bearer {MASTER}"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _conversation(n: int) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for i in range(n):
        messages += [{"role": "user", "content": f"{SECRET} question {i} about bicycle gears"}, {"role": "assistant", "content": f"answer {i}"}]
    return [*messages, {"role": "user", "content": f"{SECRET}: and the first answer?"}]


def _consult_once(recorded: Recorded) -> Reply:
    assert recorded.body is not None
    if any(m["role"] == "tool" for m in recorded.body["messages"]):
        return Reply(content="Read it.")
    system = recorded.body["messages"][0]["content"]
    root = etree.fromstring(system[system.index("<PagedContext") :].encode())
    background = root.find("Background_Context")
    folded = re.findall(r"^\[([0-9a-f]+)\] ", background.text or "", re.MULTILINE) if background is not None else []
    target = ([n.get("id") for n in root.iter("Node")] + folded)[0]
    return Reply(content=None, tool_calls=[ToolCall("pcp_consult", json.dumps({"reason": "look", "ids": [target]}), id="call_c")])


def test_metrics_need_the_master_key(gw: GatewayProcess) -> None:
    assert httpx.get(gw.root_url + "/metrics").status_code == 401
    forbidden = httpx.get(gw.root_url + "/metrics", headers={"authorization": f"Bearer {ALICE}"})
    assert forbidden.status_code == 403 and forbidden.json()["error"]["type"] == "permission_error"


def test_counters_move_as_requests_flow(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    before = scrape(gw)
    client = openai.OpenAI(base_url=gw.base_url, api_key=ALICE, max_retries=0, default_headers={"X-PCP-Thread": "m-" + uuid.uuid4().hex[:8]})
    upstream.script(_consult_once, _consult_once, Reply(content="streamed"), Reply(content="plain"))
    raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=_conversation(3))  # type: ignore[arg-type]
    assert raw.headers["x-pcp-rounds"] == "2" and raw.headers["x-pcp-form"] == "paged"
    prompt, history = int(raw.headers["x-pcp-prompt-tokens"]), int(raw.headers["x-pcp-history-tokens"])
    chunks = list(client.chat.completions.create(model="fake-model", messages=_conversation(4), stream=True))  # type: ignore[arg-type]
    assert chunks
    client.chat.completions.create(model="fake-model", messages=_conversation(1), extra_headers={"X-PCP-Mode": "off"})  # type: ignore[arg-type]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gw.base_url, api_key="sk-wrong", max_retries=0).models.list()
    after = scrape(gw)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    chat = {"route": "/v1/chat/completions", "model": "fake-model"}
    assert moved("pcp_requests_total", **chat, form="paged", status="200") == 2
    assert moved("pcp_requests_total", **chat, form="pass-through", status="200") == 1
    assert moved("pcp_requests_total", route="/v1/models", model="", form="", status="401") == 1
    assert moved("pcp_request_seconds_count", **chat, form="paged") == 2
    assert moved("pcp_upstream_rounds_count", model="fake-model", form="paged") == 2
    assert moved("pcp_upstream_rounds_sum", model="fake-model", form="paged") == 3  # 2 rounds, then 1
    assert moved("pcp_zoom_pages_total", action="Consult") == 1
    assert moved("pcp_prompt_tokens_total", model="fake-model", form="paged") > prompt
    assert moved("pcp_history_tokens_total", model="fake-model", form="paged") > history
    assert moved("pcp_redis_errors_total") == 0
    for state in ("queued", "held", "retrying"):
        assert ("pcp_jobs", (("state", state),)) in after
    assert ("pcp_job_oldest_age_seconds", ()) in after and ("pcp_jobs_dead", ()) in after


HOBBIES = [
    ("We repainted the kitchen cabinets sage green.", "Sage goes well with oak floors."),
    ("My sourdough starter smells of acetone.", "Feed it twice a day for a while."),
    ("Which tent pegs hold in sand?", "Long screw pegs or sand anchors."),
    ("How often should a violin be restrung?", "Every six to twelve months if you play daily."),
    ("Our cat ignores the new scratching post.", "Rub catnip on it and put it near her bed."),
]


def test_a_question_is_embedded_once_and_its_vector_kept_for_the_exchange_that_stores_it(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    """A request embeds its question to find its pages; the next request stores that question with its answer and
    embeds the user's own words of that exchange: the same text, so the kept vector is given, not a forward pass."""
    client = openai.OpenAI(base_url=gw.base_url, api_key=ALICE, max_retries=0, default_headers={"X-PCP-Thread": "e-" + uuid.uuid4().hex[:8]})
    history = [{"role": role, "content": text} for pair in HOBBIES for role, text in zip(("user", "assistant"), pair)]
    question = {"role": "user", "content": "Which telephoto lens works for birding from a kayak?"}
    upstream.script(Reply(content="A 100-400mm zoom."), Reply(content="Not from a kayak."))
    # a budget the pages do not all fit whole in: they are ranked against the question (a thread that fits whole is not)
    client = client.with_options(default_headers={**client.default_headers, "X-PCP-Budget": "400"})
    client.chat.completions.create(model="fake-model", messages=[*history, question])  # type: ignore[arg-type]
    before = scrape(gw)
    answered = [*history, question, {"role": "assistant", "content": "A 100-400mm zoom."}]
    client.chat.completions.create(model="fake-model", messages=[*answered, {"role": "user", "content": "Would I need a tripod?"}])  # type: ignore[arg-type]
    after = scrape(gw)
    # run through the model: the new exchange's page and the new question; the question before came back as the
    # user's own words of that exchange, and its vector was kept
    assert value(after, "pcp_embedding_kept_total") - value(before, "pcp_embedding_kept_total") == 1
    assert value(after, "pcp_embedding_texts_total") - value(before, "pcp_embedding_texts_total") == 2


def _lines(gw: GatewayProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gw.log().splitlines() if line.startswith("{")]


def test_one_json_line_per_request_without_content_or_keys(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    thread = "log-" + uuid.uuid4().hex[:8]
    upstream.script(Reply(content="fine"))
    request_id = "req-" + uuid.uuid4().hex[:8]
    client = openai.OpenAI(base_url=gw.base_url, api_key=ALICE, max_retries=0, default_headers={"X-PCP-Thread": thread, "X-Request-Id": request_id})
    raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=_conversation(2))  # type: ignore[arg-type]
    assert raw.headers["x-request-id"] == request_id
    deadline = time.monotonic() + 10
    while not [line for line in _lines(gw) if line.get("request_id") == request_id]:
        assert time.monotonic() < deadline, gw.log()[-2000:]
        time.sleep(0.05)
    [line] = [line for line in _lines(gw) if line.get("request_id") == request_id]
    assert line["logger"] == "gateway.access" and line["level"] == "info"
    assert {k: line[k] for k in ("route", "status", "tenant", "thread", "model", "form", "rounds")} == {
        "route": "/v1/chat/completions", "status": 200, "tenant": "alice", "thread": thread, "model": "fake-model", "form": "paged", "rounds": 1,
    }  # fmt: skip
    assert line["prompt_tokens"] == int(raw.headers["x-pcp-prompt-tokens"]) and line["latency_ms"] > 0
    log = gw.log()
    assert all(text.startswith("{") for text in log.splitlines() if text.strip()), "every line is JSON"
    assert SECRET not in log and ALICE not in log and MASTER not in log
    # each request id appears on one access line only (one line per request)
    ids = [line["request_id"] for line in _lines(gw) if line.get("logger") == "gateway.access"]
    assert len(ids) == len(set(ids))


def test_a_request_over_its_budget_is_counted_and_logged(gw: GatewayProcess, upstream: FakeUpstream) -> None:
    """A client whose own parts fill the budget (a coding assistant's) goes over it: the operator sees it in
    `pcp_over_budget_total` and on the request's access line, since such a client shows no response header."""
    request_id = "req-" + uuid.uuid4().hex[:8]
    headers = {"X-PCP-Thread": "over-" + uuid.uuid4().hex[:8], "X-Request-Id": request_id, "X-PCP-Budget": "400"}
    client = openai.OpenAI(base_url=gw.base_url, api_key=ALICE, max_retries=0, default_headers=headers)
    rules = {"role": "system", "content": " ".join(f"Rule {n}: name things well." for n in range(80))}
    before = scrape(gw)
    upstream.script(Reply(content="fine"), Reply(content="fine"))
    raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=[rules, *_conversation(6)])  # type: ignore[arg-type]
    assert raw.headers["x-pcp-over-budget"] == "true"
    within = client.with_options(default_headers={**headers, "X-PCP-Budget": "4000", "X-Request-Id": request_id + "-within"})
    within.chat.completions.create(model="fake-model", messages=[rules, *_conversation(6)])  # type: ignore[arg-type]
    assert value(scrape(gw), "pcp_over_budget_total", model="fake-model") - value(before, "pcp_over_budget_total", model="fake-model") == 1
    deadline = time.monotonic() + 10
    while len(lines := {line.get("request_id"): line for line in _lines(gw) if line.get("request_id", "").startswith(request_id)}) < 2:
        assert time.monotonic() < deadline, gw.log()[-2000:]
        time.sleep(0.05)
    assert lines[request_id]["over_budget"] is True and lines[request_id + "-within"].get("over_budget") is None
