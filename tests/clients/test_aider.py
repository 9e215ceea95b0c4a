"""aider, the real program, over several turns through the gateway: its scaffolding reaches the model verbatim in
every request and is never memory; its conversation is paged once it outgrows the budget.

aider (from `scripts/setup-clients`) runs in its own venv, driven through its Python API by `aider_driver.py`,
against the gateway subprocess started with the built-in aider profile (its pins, its summarizer's side requests) and
a small budget (aider cannot send headers per request, so the budget comes from the config), and the scripted
upstream.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.core import TokenCounter
from tests.clients.conftest import ROOT, client
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply
from tests.support.gateway_process import GatewayProcess, gateway_config

pytestmark = pytest.mark.clients

BUDGET = 4500  # aider's own parts take ~3400 tokens of it here (the live message alone ~700)
FILES_MARK = "I have *added these files to the chat*"
EXAMPLE_MARKS = ("get_factorial", "Refactor hello()", "I switched to a new code base", FILES_MARK, "summaries of some files")
GREET = 'def greet(name):\n    return "Hello " + name\n'
EDIT = '''greet.py
```python
<<<<<<< SEARCH
def greet(name):
    return "Hello " + name
=======
def greet(name):
    return "Hello " + name


def bye(name):
    return "Bye " + name
>>>>>>> REPLACE
```
'''
TOPICS = ["sourdough", "bicycle gears", "tax forms", "hiking boots", "jazz chords", "tomato blight", "solar panels", "chess openings"]
TURNS = [
    "Turn 1: what does greet return for an empty name?",
    "Turn 2: add a bye function next to greet.",
    *(f"Turn {n}: unrelated, tell me about {topic} and the code word WORD-{n}." for n, topic in enumerate(TOPICS, start=3)),
]


@pytest.fixture(scope="module")
def aider_python() -> Path:
    return client("aider/bin/python")


@pytest.fixture(scope="module", params=["pins", "layout"])
def gateway(request: pytest.FixtureRequest, fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The gateway with the built-in aider profile's pins, or with the profile off: the request layout alone decides."""
    workdir = tmp_path_factory.mktemp("aider-gateway")
    pcp: dict[str, Any] = {"budget_tokens": BUDGET, "recent_turns": 2}
    if request.param == "layout":
        pcp["profiles"] = {"aider": False}
    with GatewayProcess(config=gateway_config(fake.url, workdir / "data", pcp=pcp), workdir=workdir) as process:
        yield process


def _reply(recorded: Recorded) -> Reply:
    """The model's side: an edit for the turn that asks for one, a long answer to every other."""
    assert recorded.body is not None
    asked = str(recorded.body["messages"][-1]["content"]).split("\n", 1)[0]
    if asked.startswith("Turn 2:"):
        return Reply(content="Here is the new function.\n\n" + EDIT)
    words = " ".join(f"detail-{i} of the matter" for i in range(40))
    return Reply(content=f"About that ({asked[:7]}): {words}. Nothing to change in the code.")


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "greet.py").write_text(GREET, encoding="utf-8")
    (path / "main.py").write_text("import greet\n\nprint(greet.greet('bob'))\n", encoding="utf-8")
    (path / "mathy.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    return _committed(path)


def _committed(path: Path) -> Path:
    """``path`` made a git repository with everything in it committed."""
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run([*git, *command], cwd=path, check=True)
    return path


def _run_aider(
    python: Path, gateway: GatewayProcess, repo: Path, home: Path, thread: str | None,
    files: Sequence[str] = ("greet.py",), turns: Sequence[str] = TURNS, map_tokens: int | None = None, settle: bool = False,
) -> dict[str, Any]:
    # aider's model-price list is fetched from the web unless its cache is fresh: an empty one keeps it offline
    (home / ".aider" / "caches").mkdir(parents=True)
    (home / ".aider" / "caches" / "model_prices_and_context_window.json").write_text("{}", encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_ANALYTICS": "false"}
    spec: dict[str, Any] = {"base_url": gateway.base_url, "repo": str(repo), "thread": thread, "model": "fake-model", "files": list(files), "turns": list(turns)}
    if map_tokens is not None:
        spec["map_tokens"] = map_tokens
    spec["settle"] = settle
    done = subprocess.run(
        [str(python), str(Path(__file__).with_name("aider_driver.py"))],
        input=json.dumps(spec), capture_output=True, text=True, env=env, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _nodes(pages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every page of a thread view, consolidated ones and the pages under them."""
    for page in pages:
        yield page
        yield from _nodes(page.get("children", []))


def _client_system(message: dict[str, Any]) -> str:
    text = str(message["content"])
    return text[: text.index("<PagedContext")]


def test_aider_scaffolding_is_sent_verbatim_every_time_and_only_the_conversation_is_paged(
    aider_python: Path, gateway: GatewayProcess, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script(*[_reply] * len(TURNS))
    thread = "aider-" + uuid.uuid4().hex[:10]
    result = _run_aider(aider_python, gateway, _repo(tmp_path / "repo"), tmp_path, thread)
    requests = [r.body for r in upstream.chat_requests]
    assert len(requests) == len(TURNS)  # one upstream call per turn: nothing else went out
    assert "def bye(name)" in result["files"][1]["greet.py"]  # aider applied the model's edit on disk

    systems = {_client_system(body["messages"][0]) for body in requests if body}
    assert len(systems) == 1 and systems.pop().startswith("Act as an expert software developer.")
    # Without pins, the layout alone decides, and it needs aider to show where its conversation grows. Until its
    # first edit aider appends each exchange after the files block, so its requests look like a history imported
    # by the first request and growing at its end: the examples are paged like one. Once the edit is applied it
    # moves the exchanges before the files block, and the file block is replaced: the request after the edit
    # (the third) is the first whose scaffolding the layout finds.
    pinned = "profiles" not in gateway.config["pcp"]
    found_from = 0 if pinned else 2
    preambles = set()
    for turn, body in enumerate(requests):
        assert body is not None
        messages = body["messages"]
        # the files block: exactly one, with the file's contents as they were when aider sent the request
        current = result["files"][turn - 1]["greet.py"] if turn else GREET
        blocks = [str(m["content"]) for m in messages if FILES_MARK in str(m["content"])]
        assert len(blocks) == 1 and current in blocks[0]
        if turn < found_from:
            continue
        xml = str(messages[0]["content"])[len(_client_system(messages[0])) :]
        assert not any(mark in xml for mark in EXAMPLE_MARKS), "scaffolding rendered as memory"
        # the examples, the code-base switch and the repo map lead every request, verbatim and in aider's order
        switch = next(i for i, m in enumerate(messages) if str(m["content"]).startswith("I switched to a new code base"))
        preambles.add(json.dumps(messages[1 : switch + 4]))
        assert "get_factorial" in str(messages[1]["content"]) and "Here are summaries" in str(messages[switch + 2]["content"])
    assert len(preambles) == 1

    last = requests[-1]["messages"]
    verbatim = " ".join(str(m["content"]) for m in last[1:])
    assert "Turn 1:" not in verbatim and "Turn 5:" not in verbatim  # early turns are paged, not resent
    assert all(f"Turn {n}:" in verbatim for n in (8, 9, 10))  # the two recent turns and the live one are
    assert TokenCounter.for_model("fake-model").count_messages(last) <= BUDGET
    paged = str(last[0]["content"])
    assert all(f"Turn {n}:" in paged for n in range(1, 8))  # the paged turns are in the context, as nodes or lines

    view = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-client"}, timeout=10).json()
    summaries = json.dumps(view["pages"])
    assert "Turn 1:" in summaries and "Turn 8:" in summaries
    if pinned:
        assert not any(mark in summaries for mark in EXAMPLE_MARKS), "scaffolding stored as pages"
    else:  # only the first requests' copies (never shown again): the files block as it was then, and no later one
        originals = [page for page in _nodes(view["pages"]) if page["type"] == "Original"]
        assert sum(FILES_MARK in page["summary"] for page in originals) == 1


MODULES = ("gateway/service/background.py", "gateway/service/split_cache.py")  # two real modules added to the chat


def test_aider_whose_own_parts_exceed_the_shipped_budget_still_sees_its_conversation(
    aider_python: Path, fake: FakeUpstream, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """At the shipped budget, aider's own parts in a real repository (its prompt and examples, a 1,024-token
    repository map of this package, two of its modules added) exceed the budget alone. The budget cannot be kept,
    and the history gets a quarter of it: every turn still reaches the model with the turn before it."""
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))["pcp"]
    budget = shipped["budget_tokens"]
    pcp = {"budget_tokens": budget, "raw_form": shipped.get("raw_form", True)}
    repo = tmp_path / "repo"  # this repository's package: a map as full as a real project's
    shutil.copytree(ROOT / "gateway", repo / "gateway", ignore=shutil.ignore_patterns("__pycache__"))
    turns = [f"Question {n}: about the scheduler, and the code word WORD-{n}." for n in range(1, 6)]  # no edit asked
    upstream.script(*[_reply] * len(turns))
    workdir = tmp_path / "gateway"
    workdir.mkdir()
    with GatewayProcess(config=gateway_config(fake.url, workdir / "data", pcp=pcp), workdir=workdir) as gateway:
        thread = "aider-" + uuid.uuid4().hex[:10]
        _run_aider(aider_python, gateway, _committed(repo), tmp_path, thread, files=MODULES, turns=turns, map_tokens=1024)
    requests = [r.body for r in upstream.chat_requests]
    assert len(requests) == len(turns)
    counter = TokenCounter.for_model("fake-model")
    for n, body in enumerate(requests, start=1):
        assert body is not None
        sent = json.dumps(body["messages"])
        assert f"WORD-{n}" in sent and (n == 1 or f"WORD-{n - 1}" in sent), f"turn {n} lost the turn before it"
        assert counter.count_messages(body["messages"]) > budget  # aider's own parts alone are over it


SUMMARIZER = "*Briefly* summarize this partial conversation about programming."


def _reply_or_summary(recorded: Recorded) -> Reply:
    """`_reply`, and a summary for aider's history summarizer (its weak model is the main one here)."""
    assert recorded.body is not None
    if str(recorded.body["messages"][0]["content"]).startswith(SUMMARIZER):
        return Reply(content="I asked you about greet.py and several unrelated topics; you answered each.")
    return _reply(recorded)


def _bare_gateway(fake: FakeUpstream, workdir: Path, **pcp: Any) -> GatewayProcess:
    """The gateway on a user's own LiteLLM config: a model_list and no pcp: section (unless ``pcp`` is given)."""
    config = gateway_config(fake.url, workdir / "data", pcp=pcp)
    if not pcp:
        del config["pcp"]
    workdir.mkdir(exist_ok=True)
    return GatewayProcess(config=config, workdir=workdir)


def _threads(gateway: GatewayProcess) -> list[dict[str, Any]]:
    auth = {"Authorization": "Bearer sk-client"}
    listed: list[dict[str, Any]] = httpx.get(f"{gateway.root_url}/pcp/threads", headers=auth, timeout=10).json()["data"]
    return [httpx.get(f"{gateway.root_url}/pcp/threads/{t['id']}", headers=auth, timeout=10).json() for t in listed]


def test_two_aider_sessions_in_two_repositories_without_a_header_are_two_threads(
    aider_python: Path, fake: FakeUpstream, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """aider's first user message is its own example, the same in every session and repository: each session is
    still a thread of its own, and neither's requests ever carry the other's conversation."""
    alpha = [f"Alpha {n}: what does greet do with the word ALPHA-{n}?" for n in range(1, 4)]
    beta = [f"Beta {n}: how would greet say hello to BETA-{n}?" for n in range(1, 4)]
    upstream.script(*[_reply_or_summary] * 20)
    with _bare_gateway(fake, tmp_path / "gateway") as gateway:
        _run_aider(aider_python, gateway, _repo(tmp_path / "alpha"), tmp_path / "home-alpha", None, turns=alpha)
        first = len(upstream.chat_requests)
        _run_aider(aider_python, gateway, _repo(tmp_path / "beta"), tmp_path / "home-beta", None, turns=beta)
        threads = _threads(gateway)
    assert not any("ALPHA-" in json.dumps(r.body) for r in upstream.chat_requests[first:])
    assert len(threads) == 2
    for view, own, other in zip(sorted(threads, key=lambda v: "Beta" in json.dumps(v["pages"])), ("ALPHA-", "BETA-"), ("BETA-", "ALPHA-")):
        stored = json.dumps(view["pages"])
        assert own in stored and other not in stored


def test_one_long_aider_session_that_summarizes_its_history_stays_one_thread(
    aider_python: Path, fake: FakeUpstream, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """aider replaces the older part of its history with a summary of it (its weak model's side request) once the
    history it has filed (after each applied edit) outgrows 1,024 tokens: the session stays one thread, and the
    summarizer's requests go upstream as aider sent them and are never stored."""
    turns = [f"Question {n}: about greet, and the code word WORD-{n}." for n in range(1, 9)]
    upstream.script(*[_reply_or_summary] * 30)
    with _bare_gateway(fake, tmp_path / "gateway") as gateway:
        _run_aider(aider_python, gateway, _repo(tmp_path / "repo"), tmp_path, None, turns=turns, settle=True)
        threads = _threads(gateway)
    summaries = [r.body for r in upstream.chat_requests if r.body and str(r.body["messages"][0]["content"]).startswith(SUMMARIZER)]
    assert summaries, "aider did not summarize its history"
    assert all(len(body["messages"]) == 2 and "tools" not in body and "<PagedContext" not in json.dumps(body) for body in summaries)
    later = [r.body for r in upstream.chat_requests if r.body and "I spoke to you previously" in json.dumps(r.body["messages"])]
    assert later, "aider never sent its summary"
    assert len(threads) == 1
    stored = json.dumps(threads[0]["pages"])
    assert all(f"WORD-{n}" in stored for n in range(1, len(turns))) and SUMMARIZER not in stored


def test_aider_on_a_bare_litellm_config_keeps_its_chat_files_verbatim_in_every_request(
    aider_python: Path, fake: FakeUpstream, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A user's own LiteLLM config (no pcp: section at all), a 10-turn session of questions without edits: the file
    added to the chat reaches the model verbatim in every request, never as memory, though no edit ever shows the
    request layout where aider's files block is."""
    turns = [f"Question {n}: unrelated, tell me about {topic} and the code word WORD-{n}." for n, topic in enumerate(TOPICS + ["tea", "maps"], start=1)]
    upstream.script(*[_reply_or_summary] * 40)
    with _bare_gateway(fake, tmp_path / "gateway") as gateway:
        _run_aider(aider_python, gateway, _repo(tmp_path / "repo"), tmp_path, None, turns=turns)
    requests = [r.body for r in upstream.chat_requests if r.body and not str(r.body["messages"][0]["content"]).startswith(SUMMARIZER)]
    assert len(requests) == len(turns) == 10
    for turn, body in enumerate(requests, start=1):
        blocks = [str(m["content"]) for m in body["messages"][1:] if FILES_MARK in str(m["content"])]
        assert len(blocks) == 1 and GREET in blocks[0], f"request {turn} lost the files block"
        assert f"WORD-{turn}" in json.dumps(body["messages"][-1])
    assert any("<PagedContext" in str(body["messages"][0]["content"]) for body in requests)  # the history did outgrow it
