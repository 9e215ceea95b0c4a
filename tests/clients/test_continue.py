"""The Continue CLI, the real program (npm `@continuedev/cli`, `cn`), over several turns through the gateway: its
system prompt and tool schemas reach the model verbatim in every request, its tool calls run on the client and
their results come back, no page is anything but the conversation, and the conversation is paged once it
outgrows the budget.

`cn` is configured as Continue's docs say for an OpenAI-compatible server: a `config.yaml` with a model of
`provider: openai` whose `apiBase` is the gateway (and `X-PCP-Thread` in `requestOptions.headers`, so the session
is one thread). Each turn is one headless `cn -p` (the first starts the session, the next ones `--resume` it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.core import TokenCounter
from tests.clients.conftest import client, client_system, page_nodes
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, ToolCall
from tests.support.gateway_process import GatewayProcess, gateway_config

pytestmark = pytest.mark.clients

BUDGET = 1800  # cn's system prompt is ~290 tokens (its tool schemas are not counted); the last raw history ~2400
TOPICS = ["sourdough", "bicycle gears", "tax forms", "hiking boots", "jazz chords", "tomato blight"]
TURNS = [
    "Turn 1: what is a closure, in one line?",
    "Turn 2: please READ hello.py and tell me what it prints.",
    *(f"Turn {n}: unrelated, tell me about {topic} and the code word WORD-{n}." for n, topic in enumerate(TOPICS, start=3)),
]
OFFLINE = {"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_METRICS_ENABLED": "0"}


@pytest.fixture(scope="module")
def cn() -> Path:
    return client("continue/node_modules/.bin/cn")


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("continue-gateway")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": BUDGET, "recent_turns": 2})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def _model(project: Path) -> Callable[[Recorded], Reply]:
    """The model's side: a `Read` call when asked to READ, the file's gist after its result, long answers."""

    def reply(recorded: Recorded) -> Reply:
        assert recorded.body is not None
        last = recorded.body["messages"][-1]
        if last["role"] == "user" and "READ" in str(last["content"]):
            return Reply(content=None, tool_calls=[ToolCall("Read", json.dumps({"filepath": str(project / "hello.py")}))])
        if last["role"] == "tool":
            return Reply(content="It prints the greeting PRINTS-HI.")
        words = " ".join(f"detail-{i} of the matter" for i in range(40))
        return Reply(content=f"About that: {words}.")

    return reply


def _project(path: Path, gateway: GatewayProcess, thread: str) -> Path:
    path.mkdir()
    (path / "hello.py").write_text("print('hi from hello')\n", encoding="utf-8")
    model = {
        "name": "PCP Gateway",
        "provider": "openai",
        "model": "fake-model",
        "apiBase": gateway.base_url,
        "apiKey": "sk-client",
        "requestOptions": {"headers": {"X-PCP-Thread": thread}},
        "roles": ["chat", "edit", "apply"],
    }
    config = {"name": "pcp", "version": "0.0.1", "schema": "v1", "models": [model]}
    (path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _run(cn: Path, project: Path, home: Path, message: str, first: bool) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **OFFLINE}
    args = [str(cn), "--config", str(project / "config.yaml"), "-p", *(() if first else ("--resume",)), message]
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_continue_system_prompt_tools_and_tool_results_reach_the_model_and_the_conversation_is_paged(
    cn: Path, gateway: GatewayProcess, upstream: FakeUpstream, tmp_path: Path
) -> None:
    thread = "continue-" + uuid.uuid4().hex[:10]
    project = _project(tmp_path / "project", gateway, thread)
    upstream.script(*[_model(project)] * (2 * len(TURNS)))
    home = tmp_path / "home"
    home.mkdir()
    outputs = [_run(cn, project, home, turn, first=i == 0) for i, turn in enumerate(TURNS)]
    assert "PRINTS-HI" in outputs[1]  # the read ran on the client and its result came back to the model

    requests = [r.body for r in upstream.chat_requests if r.body]
    assert len(requests) == len(TURNS) + 1  # one request per turn, and one more with the read's result
    assert len({client_system(body) for body in requests}) == 1  # the system prompt, verbatim, every time
    assert client_system(requests[0]).startswith("You are an agent in the Continue CLI.")
    tools = [{t["function"]["name"] for t in body["tools"]} for body in requests]
    assert all({"Read", "Bash"} <= names and {"pcp_consult", "pcp_shelve"} <= names for names in tools)

    after_read = requests[2]["messages"]
    assert [m["role"] for m in after_read[-3:]] == ["user", "assistant", "tool"]
    assert after_read[-2]["tool_calls"][0]["function"]["name"] == "Read" and "hi from hello" in str(after_read[-1]["content"])

    last = requests[-1]["messages"]
    verbatim = " ".join(str(m.get("content")) for m in last[1:])
    assert "Turn 1:" not in verbatim and "Turn 2:" not in verbatim  # paged, not resent
    # the last exchange and the live turn (two recent exchanges would take more than a quarter of this budget)
    assert all(f"Turn {n}:" in verbatim for n in (7, 8))
    assert TokenCounter.for_model("fake-model").count_messages(last) <= BUDGET
    shown = [n for n in range(1, 6) if f"Turn {n}:" in str(last[0]["content"])]  # paged turns, as nodes or lines
    assert len(shown) >= 3, shown

    view = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-client"}, timeout=10).json()
    originals = [page for page in page_nodes(view["pages"]) if page["type"] == "Original"]
    assert {int(n) for page in originals for n in re.findall(r"Turn (\d):", page["summary"])} == set(range(1, len(TURNS)))
    assert all(re.search(r"Turn \d:", page["summary"]) for page in originals)  # nothing but the conversation
