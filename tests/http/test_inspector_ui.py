"""`pcp-gateway import --wait` of a ChatGPT export with no gateway running (the command runs consolidation itself),
then the inspector page and the inspection routes it reads, over HTTP, on a gateway started on the same store."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
import yaml

from tests.support.fake_upstream import FakeUpstream
from tests.support.chat_exports import run_cli, write_export
from tests.support.gateway_process import GatewayProcess, gateway_config
from tests.support.topics import TOPICS, chat_messages

KEY = "sk-inspector"
THREAD = "chatgpt-topics"


@pytest.fixture(scope="module")
def inspected(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("inspector")
    config = gateway_config(fake.url, workdir / "data", embedded=True, pcp={"recent_turns": 1})
    (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    export = write_export(workdir / "conversations.json", THREAD, chat_messages(*TOPICS))
    done = run_cli(workdir / "config.yaml", "import", str(export), "--wait", "--api-key", KEY)
    assert done.returncode == 0, done.stderr
    assert "consolidating" in done.stderr and "consolidation jobs pending: 0" in done.stderr
    assert f"thread {THREAD}" in done.stderr
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def get(gateway: GatewayProcess, path: str, **params: str) -> httpx.Response:
    return httpx.get(gateway.root_url + path, params=params, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def test_the_import_waited_for_consolidation(inspected: GatewayProcess) -> None:
    described = get(inspected, f"/pcp/threads/{THREAD}").json()
    assert described["pending_jobs"] == 0
    assert described["consolidated_pages"] >= 1
    assert described["total_pages"] == len(TOPICS) * 6 + described["consolidated_pages"]


def test_the_page_and_its_assets_come_from_the_gateway(inspected: GatewayProcess) -> None:
    page = httpx.get(inspected.root_url + "/pcp/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for landmark in ('id="api-key"', 'id="threads"', 'id="tree"', 'id="trace"', 'id="context-form"', 'id="question"', 'id="budget"', 'id="context-system"'):
        assert landmark in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sorted(sources) == ["/pcp/ui/app.css", "/pcp/ui/app.js"]  # nothing from elsewhere
    script = httpx.get(inspected.root_url + "/pcp/ui/app.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    for route in ("/pcp/threads?", "/pcp/threads/${encodeURIComponent(state.thread)}/context?", "/pages/${page.id}"):
        assert route in script.text
    assert "innerHTML" not in script.text  # store text is set as text, never parsed
    style = httpx.get(inspected.root_url + "/pcp/ui/app.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    missing = httpx.get(inspected.root_url + "/pcp/ui/secrets.txt")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_the_routes_the_page_reads(inspected: GatewayProcess) -> None:
    listed = get(inspected, "/pcp/threads", limit="10").json()
    assert listed["object"] == "list" and listed["total"] == 1 and not listed["has_more"]
    (entry,) = listed["data"]
    assert entry["id"] == THREAD and entry["pages"] >= len(TOPICS) * 6 and entry["last_used"].endswith("Z")
    assert httpx.get(inspected.root_url + "/pcp/threads").json()["data"] == []  # another tenant's view: none
    assert get(inspected, "/pcp/threads", limit="0").status_code == 400

    described = get(inspected, f"/pcp/threads/{THREAD}").json()
    container = next(p for p in described["pages"] if p["type"] == "Consolidated")
    whole = get(inspected, f"/pcp/threads/{THREAD}/pages/{container['id']}").json()
    assert whole["type"] == "Consolidated" and whole["content"] and whole["source_ids"] == [c["id"] for c in container["children"]]
    child = get(inspected, f"/pcp/threads/{THREAD}/pages/{container['children'][0]['id']}").json()
    assert child["type"] == "Original" and child["content"].startswith("user: ")
    unknown = get(inspected, f"/pcp/threads/{THREAD}/pages/0123456789")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"

    preview = get(inspected, f"/pcp/threads/{THREAD}/context", q="How much salt goes in the pasta water?", budget="800").json()
    assert preview["prompt_tokens"] <= 800 and "<PagedContext" in preview["system"]
