"""Codex CLI, the real program (npm `@openai/codex`, `codex`), over several headless turns through the gateway's
Responses API: its instructions and function tools reach the model verbatim in every request, its `exec_command`
call runs on the client and the result comes back, the session is one thread without any gateway setting, and the
conversation is paged once it outgrows the budget.

`codex` is configured as README.md says: a provider of its own in `config.toml` pointing at the gateway with
`wire_api = "responses"`, and a `model` that is a `model_name` of the gateway's config. Each turn is one `codex exec`
(the first starts the session, the next ones `codex exec resume --last`).
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

BUDGET = 4000  # Codex's instructions and environment context are ~4,000 tokens; the history gets a quarter
TOPICS = ["sourdough", "bicycle gears", "tax forms", "hiking boots"]
TURNS = [
    "Turn 1: what is a closure, in one line?",
    "Turn 2: please READ hello.py and tell me what it prints.",
    *(f"Turn {n}: unrelated, tell me about {topic} and the code word WORD-{n}." for n, topic in enumerate(TOPICS, start=3)),
]


@pytest.fixture(scope="module")
def codex() -> Path:
    return client("codex/node_modules/.bin/codex")


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("codex-gateway")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": BUDGET, "recent_turns": 2})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def _model(recorded: Recorded) -> Reply:
    """The model's side: an `exec_command` call when asked to READ, the file's gist after its result, long answers."""
    assert recorded.body is not None
    last = recorded.body["messages"][-1]
    if last["role"] == "user" and "READ" in str(last["content"]):
        return Reply(content=None, tool_calls=[ToolCall("exec_command", json.dumps({"cmd": "cat hello.py"}))])
    if last["role"] == "tool":
        return Reply(content="It prints the greeting PRINTS-HI.")
    words = " ".join(f"detail-{i} of the matter" for i in range(40))
    return Reply(content=f"About that: {words}.")


def _home(path: Path, gateway: GatewayProcess) -> Path:
    (path / ".codex").mkdir(parents=True)
    (path / ".codex" / "config.toml").write_text(
        f'model = "fake-model"\nmodel_provider = "pcp"\n\n[model_providers.pcp]\nname = "PCP Gateway"\n'
        f'base_url = "{gateway.base_url}"\nenv_key = "PCP_API_KEY"\nwire_api = "responses"\n',
        encoding="utf-8",
    )
    return path


def _run(codex: Path, project: Path, home: Path, message: str, first: bool) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "PCP_API_KEY": "sk-client"}
    args = [str(codex), "exec", "--skip-git-repo-check", *(() if first else ("resume", "--last")), message]
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_codex_turns_a_tool_round_and_a_resumed_session_are_one_thread_and_are_paged(
    codex: Path, gateway: GatewayProcess, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(*[_model] * (3 * len(TURNS)))
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text("print('hi from hello')\n", encoding="utf-8")
    (project / "AGENTS.md").write_text("# House rules\n\nAlways answer in British English. Run tests with make check.\n", encoding="utf-8")
    home = _home(tmp_path / "home", gateway)
    outputs = [_run(codex, project, home, turn, first=i == 0) for i, turn in enumerate(TURNS)]
    assert "PRINTS-HI" in outputs[1]  # the command ran on the client and its result came back to the model

    requests = [r.body for r in upstream.chat_requests if r.body]
    assert len(requests) == len(TURNS) + 1  # one request per turn, and one more with the command's output
    prompt = client_system(requests[0])
    assert prompt.startswith("You are a coding agent running in the Codex CLI")
    assert all(client_system(body).startswith(prompt) for body in requests)  # the system prompt, verbatim, every time
    # Codex's message of the session's context (the user's AGENTS.md, then the environment): once the first exchange
    # is paged, it is sent on as written after the client's prompt (its two parts a line apart), and is in no page
    context = requests[0]["messages"][1]["content"]
    assert context.startswith("# AGENTS.md instructions for ") and "British English" in context and "<environment_context>" in context
    parts = context.replace("</INSTRUCTIONS><environment_context>", "</INSTRUCTIONS>\n<environment_context>")
    assert client_system(requests[-1]) == f"{prompt.rstrip()}\n\n{parts}\n\n"
    tools = [{t["function"]["name"] for t in body["tools"]} for body in requests]
    assert all("exec_command" in names and {"pcp_consult", "pcp_shelve"} <= names for names in tools)
    assert not any("web_search" in names for names in tools)  # a hosted tool the chat model cannot run is left out
    after_call = requests[2]["messages"]
    assert [m["role"] for m in after_call[-3:]] == ["user", "assistant", "tool"]
    assert after_call[-2]["tool_calls"][0]["function"]["name"] == "exec_command" and "hi from hello" in str(after_call[-1]["content"])

    last = requests[-1]["messages"]
    verbatim = " ".join(str(m.get("content")) for m in last[1:])
    assert "Turn 1:" not in verbatim and "Turn 2:" not in verbatim  # paged, not resent
    assert all(f"Turn {n}:" in verbatim for n in (5, 6))  # the last exchange and the live turn
    assert "Turn 2:" in str(last[0]["content"]) and "PRINTS-HI" in str(last[0]["content"])  # in the context
    paged = str(last[0]["content"])[str(last[0]["content"]).index("<PagedContext"):]
    assert "environment_context" not in paged and "British English" not in paged

    auth = {"Authorization": "Bearer sk-client"}
    threads = httpx.get(f"{gateway.root_url}/pcp/threads", headers=auth, timeout=10).json()["data"]
    assert len(threads) == 1  # no header: the session is found by what it carries, every turn
    view = httpx.get(f"{gateway.root_url}/pcp/threads/{threads[0]['id']}", headers=auth, timeout=10).json()
    originals = [page for page in page_nodes(view["pages"]) if page["type"] == "Original"]
    # one page per finished turn, each of what was said: the session's context is not in the first one's
    assert len(originals) == len(TURNS) - 1
    assert {int(n) for page in originals for n in re.findall(r"Turn (\d):", page["summary"])} == set(range(1, len(TURNS)))
    assert not any("environment_context" in page["summary"] or "British English" in page["summary"] for page in originals)
