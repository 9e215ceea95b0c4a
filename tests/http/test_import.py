"""`pcp-gateway import` / `export` against a running gateway: a LoCoMo conversation imported from JSONL is stored
as the HTTP replay of its sessions stores it, a second import adds nothing, export gives the messages back, and the
context preview builds a context without calling the model or changing the thread."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from bench.datasets import LOCOMO_DATA, Conversation, load_locomo
from tests.support.fake_upstream import FakeUpstream, Recorded
from tests.support.chat_exports import run_cli
from tests.support.gateway_process import GatewayProcess, gateway_config

KEY = "sk-import"
CONVERSATION = "conv-30"  # 19 sessions; 7 open with the assistant, continuing an exchange the last one sealed


@pytest.fixture(scope="module")
def locomo() -> Conversation:
    if not LOCOMO_DATA.exists():
        pytest.skip(f"LoCoMo is not at {LOCOMO_DATA}")
    return next(c for c in load_locomo().conversations if c.id == CONVERSATION)


@pytest.fixture(scope="module")
def served(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, Path]]:
    """A gateway without consolidation (the pages stay as ingested, so the two threads compare page by page)."""
    workdir = tmp_path_factory.mktemp("import")
    config = gateway_config(fake.url, workdir / "data", pcp={"consolidation": False})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process, workdir / "config.yaml"


@dataclass
class Imported:
    """The conversation imported once from JSONL as thread `imported`: what the command printed and what went
    upstream while it ran."""

    file: Path
    first: subprocess.CompletedProcess[str]
    upstream_calls: list[Recorded]


@pytest.fixture(scope="module")
def imported(served: tuple[GatewayProcess, Path], locomo: Conversation, fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Imported:
    """One import for both tests (the second only reads the thread, and checks it is left unchanged)."""
    file = tmp_path_factory.mktemp("import-file") / "conv.jsonl"
    file.write_text(as_jsonl(locomo, "imported"), encoding="utf-8")
    fake.reset()
    first = run_cli(served[1], "import", str(file), "--api-key", KEY)
    return Imported(file, first, list(fake.chat_requests))


def replay_over_http(gateway: GatewayProcess, conv: Conversation, thread: str) -> None:
    """One request per session with the whole history so far, dated at the session (as bench/evidence_recall.py)."""
    history: list[dict[str, str]] = []
    with openai.OpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, timeout=120) as client:
        for when, turns in conv.sessions:
            history += [{"role": t.role, "content": t.text} for t in turns]
            client.chat.completions.create(
                model="fake-model", messages=history,  # type: ignore[arg-type]
                extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": when.isoformat()},
            )  # fmt: skip


def as_jsonl(conv: Conversation, thread: str) -> str:
    messages = [{"role": t.role, "content": t.text, "timestamp": when.isoformat()} for when, turns in conv.sessions for t in turns]
    return json.dumps({"thread": thread, "messages": messages}, ensure_ascii=False) + "\n"


def pages_of(gateway: GatewayProcess, thread: str) -> dict[str, Any]:
    response = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200
    return dict(response.json())


def originals(described: dict[str, Any]) -> list[tuple[str, str, int, str]]:
    """The thread's pages as stored at ingestion: id, time, tokens, summary (heat and views differ by use)."""
    return [(p["id"], p["timestamp"], p["tokens"], p["summary"]) for p in described["pages"]]


def test_import_stores_what_the_http_replay_stores_and_export_gives_it_back(
    served: tuple[GatewayProcess, Path], locomo: Conversation, fake: FakeUpstream, imported: Imported, tmp_path: Path
) -> None:
    gateway, config = served
    first, file = imported.first, imported.file
    assert first.returncode == 0, first.stderr
    assert "importing" in first.stderr and "pages stored:" in first.stderr and "consolidation jobs pending" in first.stderr
    assert imported.upstream_calls == []  # nothing went upstream
    fake.reset()
    replay_over_http(gateway, locomo, "replayed")
    replayed, stored = pages_of(gateway, "replayed"), pages_of(gateway, "imported")
    assert stored["total_pages"] == replayed["total_pages"] > len(locomo.sessions)
    assert originals(stored) == originals(replayed)
    assert f"{stored['total_pages']} new page(s) stored in 1 thread(s)" in first.stderr

    again = run_cli(config, "import", str(file), "--api-key", KEY)
    assert again.returncode == 0, again.stderr
    assert "0 new page(s) stored" in again.stderr
    assert pages_of(gateway, "imported")["total_pages"] == stored["total_pages"]

    sent = [{"role": t.role, "content": t.text} for t in locomo.turns]
    for thread in ("imported", "replayed"):
        out = tmp_path / f"{thread}.jsonl"
        exported = run_cli(config, "export", thread, "--api-key", KEY, "-o", str(out))
        assert exported.returncode == 0, exported.stderr
        line = json.loads(out.read_text(encoding="utf-8"))
        assert line == {"thread": thread, "messages": sent}

    # another tenant has no such thread
    missing = run_cli(config, "export", "imported", "--api-key", "sk-someone-else")
    assert missing.returncode == 1 and "no stored messages" in missing.stderr


def test_the_context_preview_builds_without_calling_the_model_or_changing_the_thread(
    served: tuple[GatewayProcess, Path], fake: FakeUpstream, imported: Imported
) -> None:
    gateway, _ = served
    assert imported.first.returncode == 0, imported.first.stderr
    before = pages_of(gateway, "imported")
    fake.reset()
    headers = {"Authorization": f"Bearer {KEY}"}
    url = f"{gateway.root_url}/pcp/threads/imported/context"
    question = "What did Gina say about her dance studio?"
    response = httpx.get(url, params={"q": question, "budget": "1500"}, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["budget"] == 1500 and body["model"] == "fake-model" and body["query"] == question
    assert 0 < body["prompt_tokens"] <= 1500 and not body["over_budget"]
    assert body["pages_total"] == before["total_pages"] and 0 < body["pages_shown"] <= body["pages_total"]
    assert body["system"].startswith("<PagedContext") and f"<Query>{question}</Query>" in body["system"]
    assert body["messages"][0] == {"role": "system", "content": body["system"]}
    assert body["messages"][-1] == {"role": "user", "content": question}
    assert fake.chat_requests == []
    after = pages_of(gateway, "imported")
    assert after == before  # no page, view, trace step or form change

    for params, status in (({"q": ""}, 400), ({"q": "x", "budget": "0"}, 400), ({"q": "x", "budget": "lots"}, 400), ({"q": "x", "model": "nope"}, 404)):
        bad = httpx.get(url, params=params, headers=headers)
        assert bad.status_code == status, bad.text
        assert bad.json()["error"]["type"] == "invalid_request_error"
