"""opencode, the real program (npm `opencode-ai`), over several turns through the gateway: its long system prompt
and its tool schemas reach the model verbatim in every request, its tool calls run on the client and their results
come back, no page is anything but the conversation, and the conversation is paged once it outgrows the budget.

opencode is configured as its docs say for an OpenAI-compatible server: a provider using `@ai-sdk/openai-compatible`
with the gateway's base URL (and `X-PCP-Thread` in the provider's `headers`, so the session is one thread). Each turn
is one `opencode run` (the first starts the session, the next ones `--continue` it).
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

from gateway.core import TokenCounter
from tests.clients.conftest import client
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, ToolCall
from tests.support.gateway_process import GatewayProcess, gateway_config

pytestmark = pytest.mark.clients

BUDGET = 4000  # opencode's system prompt alone is ~2000 tokens; the last turn's raw history ~4300
TOPICS = ["sourdough", "bicycle gears", "tax forms", "hiking boots", "jazz chords", "tomato blight"]
TURNS = [
    "Turn 1: what is a closure, in one line?",
    "Turn 2: please READ hello.py and tell me what it prints.",
    *(f"Turn {n}: unrelated, tell me about {topic} and the code word WORD-{n}." for n, topic in enumerate(TOPICS, start=3)),
]
# what opencode would otherwise fetch or start from the network at run time
OFFLINE = {name: "1" for name in ("OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                                  "OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_SHARE")}  # fmt: skip


@pytest.fixture(scope="module")
def opencode() -> Path:
    return client("opencode/node_modules/.bin/opencode")


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("opencode-gateway")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": BUDGET, "recent_turns": 2})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def _model(project: Path) -> Callable[[Recorded], Reply]:
    """The model's side: a title for opencode's title request, a `read` call when asked to READ, long answers."""

    def reply(recorded: Recorded) -> Reply:
        assert recorded.body is not None
        messages = recorded.body["messages"]
        if str(messages[0]["content"]).startswith("You are a title generator"):
            return Reply(content="Questions about code")
        last = messages[-1]
        if last["role"] == "user" and "READ" in str(last["content"]):
            return Reply(content=None, tool_calls=[ToolCall("read", json.dumps({"filePath": str(project / "hello.py")}))])
        if last["role"] == "tool":
            return Reply(content="It prints the greeting PRINTS-HI.")
        words = " ".join(f"detail-{i} of the matter" for i in range(40))
        return Reply(content=f"About that: {words}.")

    return reply


def _project(path: Path, gateway: GatewayProcess, thread: str) -> Path:
    path.mkdir()
    (path / "hello.py").write_text("print('hi from hello')\n", encoding="utf-8")
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "PCP Gateway",
        "options": {"baseURL": gateway.base_url, "apiKey": "sk-client", "headers": {"X-PCP-Thread": thread}},
        "models": {"fake-model": {"name": "fake-model"}},
    }
    config = {"$schema": "https://opencode.ai/config.json", "provider": {"pcp": provider}, "model": "pcp/fake-model", "autoupdate": False, "share": "disabled"}
    (path / "opencode.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def _run(opencode: Path, project: Path, home: Path, message: str, first: bool) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **OFFLINE}
    args = [str(opencode), "run", *(() if first else ("--continue",)), message]
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _client_system(body: dict[str, Any]) -> str:
    text = str(body["messages"][0]["content"])
    return text[: text.index("<PagedContext")]


def test_opencode_system_prompt_tools_and_tool_results_reach_the_model_and_the_conversation_is_paged(
    opencode: Path, gateway: GatewayProcess, upstream: FakeUpstream, tmp_path: Path
) -> None:
    thread = "opencode-" + uuid.uuid4().hex[:10]
    project = _project(tmp_path / "project", gateway, thread)
    upstream.script(*[_model(project)] * (3 * len(TURNS)))
    home = tmp_path / "home"
    home.mkdir()
    outputs = [_run(opencode, project, home, turn, first=i == 0) for i, turn in enumerate(TURNS)]
    assert "PRINTS-HI" in outputs[1]  # the read ran on the client and its result came back to the model

    agent = [r.body for r in upstream.chat_requests if r.body and str(r.body["messages"][0]["content"]).startswith("You are opencode")]
    assert len(agent) == len(TURNS) + 1  # one request per turn, and one more with the read's result
    assert len({_client_system(body) for body in agent}) == 1  # the system prompt, verbatim, every time
    tools = [{t["function"]["name"] for t in body["tools"]} for body in agent]
    assert all({"bash", "read", "edit", "write"} <= names and {"pcp_consult", "pcp_shelve"} <= names for names in tools)

    after_read = agent[2]["messages"]
    assert [m["role"] for m in after_read[-3:]] == ["user", "assistant", "tool"]
    assert after_read[-2]["tool_calls"][0]["function"]["name"] == "read" and "hi from hello" in after_read[-1]["content"]

    last = agent[-1]["messages"]
    verbatim = " ".join(str(m.get("content")) for m in last[1:])
    assert "Turn 1:" not in verbatim and "Turn 2:" not in verbatim  # paged, not resent
    assert all(f"Turn {n}:" in verbatim for n in (6, 7, 8))  # the two recent turns and the live one
    assert TokenCounter.for_model("fake-model").count_messages(last) <= BUDGET
    shown = [n for n in range(1, 6) if f"Turn {n}:" in str(last[0]["content"])]  # paged turns, as nodes or lines
    assert len(shown) >= 3, shown  # the budget keeps most of them in view; an old one may be left out

    view = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-client"}, timeout=10).json()
    assert "Turn 1:" in json.dumps(view["pages"]) and "Turn 2:" in json.dumps(view["pages"])
    # opencode sends no example exchange: every stored page is a turn of the conversation (its title request,
    # on the same thread, left none), and the request layout took none of its turns for scaffolding
    originals = [page for page in _nodes(view["pages"]) if page["type"] == "Original"]
    assert originals and all(re.search(r"Turn \d:", page["summary"]) for page in originals), [p["summary"][:60] for p in originals]
    assert {int(n) for page in originals for n in re.findall(r"Turn (\d):", page["summary"])} == set(range(1, len(TURNS)))


def _nodes(pages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every page of a thread view, consolidated ones and the pages under them."""
    for page in pages:
        yield page
        yield from _nodes(page.get("children", []))
