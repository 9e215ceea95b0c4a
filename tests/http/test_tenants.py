"""Keys and tenants from outside: a gateway with a master key and three client keys, driven by the official
SDKs (openai, anthropic) and httpx, on a real Redis whose keys the tests read back."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import redis
import yaml

from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway_process import ROOT, GatewayProcess, gateway_config

MASTER = "sk-master-" + uuid.uuid4().hex
ALICE = "sk-alice-" + uuid.uuid4().hex
BOB = "sk-bob-" + uuid.uuid4().hex
CAROL = "sk-carol-" + uuid.uuid4().hex
KEYS = [
    {"key": ALICE, "tenant": "alice"},
    {"key": BOB, "tenant": "bob", "models": ["fake-model"]},
    {"key": CAROL, "tenant": "carol", "rpm": 2},
]
HELLO = [{"role": "user", "content": "Hello there"}]


def redis_url_of(config: dict[str, Any]) -> str:
    """The Redis the gateway uses: the configured one, or the URL its embedded server wrote."""
    store = config["store"]
    return str(store.get("redis_url") or (Path(store["data_dir"]) / "redis.url").read_text().strip())


@pytest.fixture(scope="module")
def keyed(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("keys")
    config = gateway_config(fake.url, workdir / "data", general_settings={"master_key": MASTER}, keys=KEYS)
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


@pytest.fixture
def store(keyed: GatewayProcess) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url_of(keyed.config), decode_responses=True)
    yield client
    client.close()


def _openai(gw: GatewayProcess, key: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, default_headers=headers)


def _thread_keys(client: redis.Redis, config: dict[str, Any], tenant: str, thread: str) -> list[str]:
    return list(client.scan_iter(match=f"{config['store']['key_prefix']}:{{{tenant}:{thread}}}:*", count=1000))


def _turns(thread: str, n: int = 3) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for i in range(n):
        messages += [{"role": "user", "content": f"{thread}: question {i} about sourdough"}, {"role": "assistant", "content": f"answer {i}"}]
    return messages + [{"role": "user", "content": "and now?"}]


def test_no_key_or_a_wrong_key_is_refused_on_every_route_in_openai_shape(keyed: GatewayProcess, upstream: FakeUpstream) -> None:
    for key in (None, "sk-wrong", ALICE + "x", ALICE[:-1]):
        headers = {"authorization": f"Bearer {key}"} if key else {}
        for method, path, body in (
            ("POST", "/v1/chat/completions", {"model": "fake-model", "messages": HELLO}),
            ("POST", "/v1/responses", {"model": "fake-model", "input": "hi"}),
            ("POST", "/v1/messages", {"model": "fake-model", "max_tokens": 10, "messages": HELLO}),
            ("GET", "/v1/models", None),
            ("GET", "/pcp/threads", None),
            ("GET", "/pcp/threads/some-thread", None),
            ("DELETE", "/pcp/threads/some-thread", None),
            ("GET", "/metrics", None),
        ):
            response = httpx.request(method, keyed.root_url + path, json=body, headers=headers)
            assert response.status_code == 401, (key, path, response.text)
            error = response.json()["error"]
            if path == "/v1/messages":  # Anthropic's shape on its API
                assert response.json()["type"] == "error" and error["type"] == "authentication_error"
            else:
                assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"
    assert upstream.chat_requests == []  # nothing reached the model
    assert httpx.get(keyed.root_url + "/healthz").status_code == 200  # load balancers need no key
    with pytest.raises(openai.AuthenticationError):
        _openai(keyed, "sk-wrong").chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=keyed.root_url, api_key="sk-wrong", max_retries=0).messages.create(
            model="fake-model", max_tokens=10, messages=HELLO  # type: ignore[arg-type]
        )


def test_a_configured_key_is_served_by_either_header(keyed: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="hi alice"), Reply(content="hi again"))
    reply = _openai(keyed, ALICE).chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "hi alice"
    message = anthropic.Anthropic(base_url=keyed.root_url, api_key=ALICE, max_retries=0).messages.create(
        model="fake-model", max_tokens=10, messages=HELLO  # type: ignore[arg-type]
    )
    assert message.content[0].text == "hi again"  # type: ignore[union-attr]
    assert all(r.headers["authorization"] == "Bearer sk-upstream" for r in upstream.chat_requests)  # client keys stay here


def test_a_model_outside_the_keys_list_is_forbidden_and_not_listed(keyed: GatewayProcess, upstream: FakeUpstream) -> None:
    bob = _openai(keyed, BOB)
    assert [m.id for m in bob.models.list()] == ["fake-model"]
    assert [m.id for m in _openai(keyed, ALICE).models.list()] == ["fake-model", "slow-model"]
    with pytest.raises(openai.PermissionDeniedError) as denied:
        bob.chat.completions.create(model="slow-model", messages=HELLO)  # type: ignore[arg-type]
    assert denied.value.body["code"] == "model_not_allowed"  # type: ignore[index]
    response = httpx.post(keyed.base_url + "/responses", json={"model": "slow-model", "input": "hi"}, headers={"authorization": f"Bearer {BOB}"})
    assert response.status_code == 403 and response.json()["error"]["type"] == "permission_error"
    assert upstream.chat_requests == []


def test_a_key_over_its_rpm_gets_429_with_retry_after(keyed: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="one"), Reply(content="two"), Reply(content="three"))
    carol = _openai(keyed, CAROL)
    for _ in range(2):
        carol.chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as limited:
        carol.chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]
    assert limited.value.body["code"] == "rate_limit_exceeded"  # type: ignore[index]
    assert 1 <= int(limited.value.response.headers["retry-after"]) <= 60
    assert len(upstream.chat_requests) == 2
    # another key is not limited by carol's rate
    _openai(keyed, ALICE).chat.completions.create(model="fake-model", messages=HELLO)  # type: ignore[arg-type]


def test_each_tenant_has_its_own_pages_whatever_the_client_sends(keyed: GatewayProcess, upstream: FakeUpstream, store: redis.Redis) -> None:
    thread = "shared-" + uuid.uuid4().hex[:8]
    messages = _turns(thread)
    upstream.script(*[Reply(content="fine")] * 5)
    _openai(keyed, ALICE, **{"X-PCP-Thread": thread}).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    _wait_idle(keyed, thread, {"authorization": f"Bearer {ALICE}"})  # her background work writes keys of its own (segment)
    alice_keys = sorted(_thread_keys(store, keyed.config, "alice", thread))
    alice_pages = store.hgetall(next(k for k in alice_keys if k.endswith(":manifest")))
    assert len(alice_pages) == 3
    # bob sends alice's thread id and her whole conversation, by header, by metadata and by fingerprint
    bob = _openai(keyed, BOB, **{"X-PCP-Thread": thread})
    bob.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    _openai(keyed, BOB).chat.completions.create(model="fake-model", messages=messages, metadata={"pcp_thread": thread})  # type: ignore[arg-type]
    _openai(keyed, BOB).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    # bob's own request carries no X-PCP-Tenant power: only the master key may name a tenant
    _openai(keyed, BOB, **{"X-PCP-Tenant": "alice", "X-PCP-Thread": thread}).chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    assert sorted(_thread_keys(store, keyed.config, "alice", thread)) == alice_keys
    assert store.hgetall(next(k for k in alice_keys if k.endswith(":manifest"))) == alice_pages
    assert _thread_keys(store, keyed.config, "bob", thread)  # bob's copy lives in his own space
    for sent in upstream.chat_requests[1:]:  # and what bob's requests sent upstream came from bob's pages only
        assert sent.headers["authorization"] == "Bearer sk-upstream"

    def as_bob(method: str, path: str) -> httpx.Response:
        return httpx.request(method, keyed.root_url + path, headers={"authorization": f"Bearer {BOB}", "x-pcp-tenant": "alice"})

    forgotten = as_bob("DELETE", f"/pcp/threads/{thread}")  # bob forgets his own copy, and only his
    assert forgotten.status_code == 200 and forgotten.json()["pages"] == 3
    assert not _thread_keys(store, keyed.config, "bob", thread)
    assert sorted(_thread_keys(store, keyed.config, "alice", thread)) == alice_keys
    assert as_bob("GET", f"/pcp/threads/{thread}").json()["total_pages"] == 0
    assert thread not in [t["id"] for t in as_bob("GET", "/pcp/threads?limit=100").json()["data"]]
    assert as_bob("DELETE", f"/pcp/threads/{thread}").status_code == 404
    assert sorted(_thread_keys(store, keyed.config, "alice", thread)) == alice_keys

    # the master key reads any tenant it names, and its own tenant otherwise
    master = {"authorization": f"Bearer {MASTER}"}
    assert httpx.get(keyed.root_url + f"/pcp/threads/{thread}", headers={**master, "x-pcp-tenant": "alice"}).json()["total_pages"] == 3
    assert httpx.get(keyed.root_url + f"/pcp/threads/{thread}", headers=master).json()["total_pages"] == 0
    bad = httpx.get(keyed.root_url + "/pcp/threads", headers={**master, "x-pcp-tenant": "a}:b"})
    assert bad.status_code == 400


def test_thread_ids_in_paths_are_the_gateways_own(keyed: GatewayProcess) -> None:
    headers = {"authorization": f"Bearer {ALICE}"}
    for thread in ("a}:b", "x" * 200, "..%2F..%2Fetc", "a%00b"):
        response = httpx.get(keyed.root_url + f"/pcp/threads/{thread}", headers=headers)
        assert response.status_code in (400, 404), (thread, response.text)
        assert "error" in response.json()


def test_keys_never_reach_the_log(keyed: GatewayProcess) -> None:
    log = keyed.log()
    assert "serving models" in log
    for key in (MASTER, ALICE, BOB, CAROL):
        assert key not in log and key[-16:] not in log
    assert "the gateway is open" not in log


def test_the_open_gateway_says_so_at_start(gateway: GatewayProcess) -> None:
    assert "no keys configured: the gateway is open" in gateway.log()


def _serve(tmp_path: Path, config: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [sys.executable, "-m", "gateway", "serve", "--config", str(path), *args]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_an_open_gateway_refuses_a_public_address(tmp_path: Path) -> None:
    config = gateway_config("http://127.0.0.1:9", tmp_path / "data")
    result = _serve(tmp_path, config, "--host", "0.0.0.0", "--port", "1")
    assert result.returncode == 2
    assert "refusing to serve on 0.0.0.0 without keys" in result.stderr and "allow_open" in result.stderr
    assert not (tmp_path / "data").exists()  # refused before anything started


def test_the_dockerfile_serves_with_a_master_key_from_the_environment() -> None:
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert shipped["general_settings"]["master_key"] == "os.environ/PCP_MASTER_KEY"
    assert "PCP_MASTER_KEY" in (ROOT / "Dockerfile").read_text()


def _wait_idle(gw: GatewayProcess, thread: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        data: dict[str, Any] = httpx.get(gw.root_url + f"/pcp/threads/{thread}", headers=headers).json()
        if data["pending_jobs"] == 0:
            return data
        assert time.monotonic() < deadline, "background work did not finish"
        time.sleep(0.1)


def test_delete_forgets_every_key_of_a_thread(keyed: GatewayProcess, upstream: FakeUpstream, store: redis.Redis) -> None:
    thread = "forget-" + uuid.uuid4().hex[:8]
    headers = {"authorization": f"Bearer {ALICE}"}
    client = _openai(keyed, ALICE, **{"X-PCP-Thread": thread})
    upstream.script(*[Reply(content="fine")] * 4)
    messages = _turns(thread, 4)
    client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    client.chat.completions.create(model="fake-model", messages=[*messages[:-1], {"role": "user", "content": "/save"}])  # type: ignore[arg-type]
    described = _wait_idle(keyed, thread, headers)
    assert described["total_pages"] >= 4 and described["segment"]["cursor"] == 4
    listed = httpx.get(keyed.root_url + "/pcp/threads", params={"limit": 100}, headers=headers).json()
    assert {"id": thread, "pages": described["total_pages"]}.items() <= next(t for t in listed["data"] if t["id"] == thread).items()
    prefix = keyed.config["store"]["key_prefix"]
    assert list(store.scan_iter(match=f"{prefix}:*{thread}*", count=1000))

    response = httpx.delete(keyed.root_url + f"/pcp/threads/{thread}", headers=headers)

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["thread"] == thread and answer["deleted"] and answer["pages"] == described["total_pages"]
    assert {"manifest", "content", "log", "segment"} <= set(answer["keys"])
    assert list(store.scan_iter(match=f"{prefix}:*{thread}*", count=1000)) == []  # no key of it, on the real Redis
    jobs = store.xrange(f"{prefix}:{{jobs}}") + store.xrange(f"{prefix}:{{jobs}}:dead")
    assert [fields for _, fields in jobs if thread in fields.get("thread", "")] == []
    assert thread not in store.zrange(f"{prefix}:threads", 0, -1) and thread not in str(store.zrange(f"{prefix}:threads", 0, -1))
    listed = httpx.get(keyed.root_url + "/pcp/threads", params={"limit": 100}, headers=headers).json()
    assert thread not in [t["id"] for t in listed["data"]]
    assert httpx.get(keyed.root_url + f"/pcp/threads/{thread}", headers=headers).json()["total_pages"] == 0
    assert httpx.delete(keyed.root_url + f"/pcp/threads/{thread}", headers=headers).status_code == 404


def test_threads_are_listed_newest_first_in_pages(keyed: GatewayProcess, upstream: FakeUpstream) -> None:
    headers = {"authorization": f"Bearer {MASTER}", "x-pcp-tenant": "dave-" + uuid.uuid4().hex[:6]}
    upstream.script(*[Reply(content="fine")] * 3)
    for i in range(3):
        thread_headers = {**headers, "x-pcp-thread": f"list-{i}", "x-pcp-time": f"2026-03-0{i + 1}T10:00:00Z"}
        client = openai.OpenAI(base_url=keyed.base_url, api_key=MASTER, max_retries=0, default_headers=thread_headers)
        client.chat.completions.create(model="fake-model", messages=_turns(f"list-{i}", 1))  # type: ignore[arg-type]
    first = httpx.get(keyed.root_url + "/pcp/threads", params={"limit": 2}, headers=headers).json()
    assert [t["id"] for t in first["data"]] == ["list-2", "list-1"] and first["has_more"] and first["total"] == 3
    assert first["data"][0] == {"id": "list-2", "pages": 1, "last_used": "2026-03-03T10:00:00Z"}
    rest = httpx.get(keyed.root_url + "/pcp/threads", params={"limit": 2, "offset": first["next_offset"]}, headers=headers).json()
    assert [t["id"] for t in rest["data"]] == ["list-0"] and not rest["has_more"] and rest["next_offset"] is None
    for bad in ({"limit": "0"}, {"limit": "101"}, {"offset": "-1"}, {"limit": "x"}):
        response = httpx.get(keyed.root_url + "/pcp/threads", params=bad, headers=headers)
        assert response.status_code == 400 and response.json()["error"]["param"] in bad


def test_a_stored_response_is_its_tenants_only(keyed: GatewayProcess, upstream: FakeUpstream) -> None:
    upstream.script(Reply(content="remembered"), Reply(content="again"))
    first = httpx.post(keyed.base_url + "/responses", json={"model": "fake-model", "input": "remember 42"}, headers={"authorization": f"Bearer {ALICE}"})
    assert first.status_code == 200
    follow = {"model": "fake-model", "input": "what number?", "previous_response_id": first.json()["id"]}
    stolen = httpx.post(keyed.base_url + "/responses", json=follow, headers={"authorization": f"Bearer {BOB}"})
    assert stolen.status_code == 400 and stolen.json()["error"]["code"] == "previous_response_not_found"
    assert httpx.post(keyed.base_url + "/responses", json=follow, headers={"authorization": f"Bearer {ALICE}"}).status_code == 200
