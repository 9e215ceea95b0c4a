"""An error no route turned into a response: the client gets the gateway's OpenAI-shaped 500, and the kept-alive
connection it came on still serves the next request (gateway.http.app._Unexpected). Real gateway, real Redis,
scripted upstream; the error is set off by a stored record the gateway cannot read (a view another program wrote)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import redis

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config


def _redis_url(config: dict[str, object]) -> str:
    store = config["store"]
    assert isinstance(store, dict)
    return str(store.get("redis_url") or (Path(store["data_dir"]) / "redis.url").read_text().strip())


def test_an_unexpected_error_is_an_openai_500_and_the_connection_serves_the_next_request(tmp_path: Path) -> None:
    with FakeUpstream() as fake:
        config = gateway_config(fake.url, tmp_path / "data", pcp={"embeddings": False})
        thread = f"broken-{uuid.uuid4().hex[:8]}"
        headers = {"X-PCP-Thread": thread}
        messages = [{"role": "user", "content": "Plan the shed."}, {"role": "assistant", "content": "Cedar, 2 by 3 m."},
                    {"role": "user", "content": "What wood did we pick?"}]
        store = None
        try:
            with GatewayProcess(config=config, workdir=tmp_path) as gateway, httpx.Client(timeout=60) as client:
                url = gateway.base_url + "/chat/completions"
                assert client.post(url, headers=headers, json={"model": "fake-model", "messages": messages}).status_code == 200
                store = redis.Redis.from_url(_redis_url(config), decode_responses=True)
                prefix = config["store"]["key_prefix"]  # type: ignore[index]
                log_key = next(iter(store.scan_iter(match=f"{prefix}:*{thread}}}:log")))
                page = store.lrange(log_key, 0, 0)[0]
                store.hset(log_key.removesuffix(":log") + ":views", page, "Sideways")  # no view the gateway knows
                # a large body: uvicorn closed the connection after an exception raised on to it, and a client's next
                # request on it was reset
                long = [*messages[:-1], {"role": "user", "content": "notes " * 120_000 + "What wood did we pick?"}]
                failed = client.post(url, headers=headers, json={"model": "fake-model", "messages": long})
                assert failed.status_code == 500
                error = failed.json()["error"]
                assert error["message"] == "the gateway failed unexpectedly; see its log" and error["type"]
                assert "Traceback" not in failed.text
                assert client.get(gateway.base_url + "/models").status_code == 200  # the same connection, still open
                assert "unexpected error on POST" in gateway.log_path.read_text()  # type: ignore[union-attr]
        finally:
            if store is not None:
                if config["store"].get("redis_url"):  # type: ignore[union-attr]
                    for key in store.scan_iter(match=f"{config['store']['key_prefix']}:*"):  # type: ignore[index]
                        store.delete(key)
                store.close()
