"""Claude Code, the real program (npm `@anthropic-ai/claude-code`, `claude`), over several headless turns through the
gateway's Messages API: its system prompt and tool schemas reach the model verbatim in every request, its `Bash` call
runs on the client and the result comes back, the session is one thread without any gateway setting, and the
conversation is paged once it outgrows the budget.

`claude` is configured as README.md says: `ANTHROPIC_BASE_URL` at the gateway, a key, and each model it asks for a
`model_name` of the gateway's config. Each turn is one `claude -p` (the first starts the session, the next ones
`--continue` it). Nothing it would send elsewhere (telemetry, updates, error reports) is left on.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.conftest import client, client_system, page_nodes
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, ToolCall
from tests.support.gateway_process import GatewayProcess, gateway_config

pytestmark = pytest.mark.clients

BUDGET = 4000  # Claude Code's system prompt and first message are ~7,000 tokens alone: the history gets a quarter
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5")  # what it asks for, routed to the scripted upstream
TOPICS = ["sourdough", "bicycle gears", "tax forms"]
TURNS = [
    "Turn 1: what is a closure, in one line?",
    "Turn 2: please READ hello.py and tell me what it prints.",
    *(f"Turn {n}: unrelated, tell me about {topic} and the code word WORD-{n}." for n, topic in enumerate(TOPICS, start=3)),
]
OFFLINE = {name: "1" for name in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY",
                                  "DISABLE_ERROR_REPORTING", "DISABLE_BUG_COMMAND")}  # fmt: skip


@pytest.fixture(scope="module")
def claude() -> Path:
    return client("claude-code/node_modules/.bin/claude")


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("claude-gateway")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": BUDGET, "recent_turns": 2})
    config["model_list"] += [{"model_name": name, "litellm_params": {"model": "openai/fake-model", "api_base": fake.url, "api_key": "k"}} for name in MODELS]
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def _model(recorded: Recorded) -> Reply:
    """The model's side: a `Bash` call when asked to READ, the file's gist after its result, long answers."""
    assert recorded.body is not None
    last = recorded.body["messages"][-1]
    if last["role"] == "user" and "READ" in str(last["content"]):
        return Reply(content=None, tool_calls=[ToolCall("Bash", json.dumps({"command": "cat hello.py", "description": "Show hello.py"}))])
    if last["role"] == "tool":
        return Reply(content="It prints the greeting PRINTS-HI.")
    words = " ".join(f"detail-{i} of the matter" for i in range(40))
    return Reply(content=f"About that: {words}.")


def _run(claude: Path, gateway: GatewayProcess, project: Path, home: Path, message: str, first: bool) -> str:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": gateway.root_url, "ANTHROPIC_AUTH_TOKEN": "sk-client",
        "ANTHROPIC_MODEL": MODELS[0], "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODELS[1], **OFFLINE,
    }  # fmt: skip
    args = [str(claude), "-p", message, *(() if first else ("--continue",)), "--allowedTools", "Bash"]  # the list ends the line
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_claude_code_turns_a_tool_round_and_a_continued_session_are_one_thread_and_are_paged(
    claude: Path, gateway: GatewayProcess, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(*[_model] * (3 * len(TURNS)))
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / "hello.py").write_text("print('hi from hello')\n", encoding="utf-8")
    outputs = [_run(claude, gateway, project, home, turn, first=i == 0) for i, turn in enumerate(TURNS)]
    assert "PRINTS-HI" in outputs[1]  # the Bash call ran on the client and its result came back to the model

    requests = [r.body for r in upstream.chat_requests if r.body]
    assert len(requests) == len(TURNS) + 1  # one request per turn, and one more with the call's result: no side request
    prompt, first = client_system(requests[0]), requests[0]["messages"][1]["content"]
    assert all(client_system(body).startswith(prompt) for body in requests)  # the system prompt, verbatim, every time
    # once the first exchange is paged, the context Claude Code wrote into it (its agents and skills lists) follows
    reminders = "\n".join(re.findall(r"<system-reminder>.*?</system-reminder>", first, re.DOTALL))
    assert reminders and client_system(requests[-1]) == f"{prompt.rstrip()}\n\n{reminders}\n\n"
    tools = [{t["function"]["name"] for t in body["tools"]} for body in requests]
    assert all({"Bash", "Read"} <= names and {"pcp_consult", "pcp_shelve"} <= names for names in tools)
    after_call = requests[2]["messages"]
    assert [m["role"] for m in after_call[-3:]] == ["user", "assistant", "tool"]
    assert after_call[-2]["tool_calls"][0]["function"]["name"] == "Bash" and "hi from hello" in str(after_call[-1]["content"])

    last = requests[-1]["messages"]
    verbatim = " ".join(str(m.get("content")) for m in last[1:])
    assert "Turn 1:" not in verbatim and "Turn 2:" not in verbatim  # paged, not resent
    assert all(f"Turn {n}:" in verbatim for n in (4, 5))  # the last exchange and the live turn
    context = str(last[0]["content"]).partition("<PagedContext")[2]
    assert "Turn 1:" in context and "Turn 2:" in context  # in the context, as a node or a line
    # the reminders Claude Code writes into the session's first message are not the user's words: they are not in the
    # page (stored as said, "the code word" matched its skills list, whose lines filled the history's room)
    assert "<system-reminder>" not in context and "code-review" not in context

    auth = {"Authorization": "Bearer sk-client"}
    threads = httpx.get(f"{gateway.root_url}/pcp/threads", headers=auth, timeout=10).json()["data"]
    assert len(threads) == 1  # no header: the session is found by what it carries, every turn
    view = httpx.get(f"{gateway.root_url}/pcp/threads/{threads[0]['id']}", headers=auth, timeout=10).json()
    originals = [page for page in page_nodes(view["pages"]) if page["type"] == "Original"]
    # one page per finished turn, each summarized by what was said in it (the tool round and its answer too)
    assert len(originals) == len(TURNS) - 1
    assert {int(n) for page in originals for n in re.findall(r"Turn (\d):", page["summary"])} == set(range(1, len(TURNS)))
    assert any("Bash" in page["summary"] and "PRINTS-HI" in page["summary"] for page in originals)
