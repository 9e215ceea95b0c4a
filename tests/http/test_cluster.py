"""Scale-out on a real Redis Cluster: three masters started from `redis-server` on loopback, two gateway
processes and two `pcp-gateway worker` processes on it (`store.cluster: true`).

Four conversations are replayed at once, each turn through the other gateway (a client re-sends its history
every turn); each ends with `/save`. The worker that takes the first consolidation job hangs in its summarizer
call and is killed there (SIGKILL); the other worker claims the job after the visibility timeout. Then: every
exchange is a page exactly once, consolidation completed with nothing dead-lettered, and both gateways
answer the thread API alike.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from redis.cluster import RedisCluster as ClusterClient

from tests.support.fake_upstream import Error, FakeUpstream, Recorded, Reply, Response, Slow
from tests.support.gateway_process import ROOT, GatewayProcess, gateway_config
from tests.support.redis_cluster import RedisCluster, cluster_binaries

pytestmark = pytest.mark.skipif(cluster_binaries() is None, reason="redis-server / redis-cli not on PATH")

KEY = "sk-cluster"
THREADS = 4
TURNS = 6
TOPICS = ["sourdough starters", "asyncio event loops", "marathon training", "garden shed framing"]


class Summarizer:
    """The first summarizer call hangs (its worker is killed there) and names the worker by the key it sent;
    every later one fails fast, so the consolidator uses its extractive fallback."""

    def __init__(self) -> None:
        self.hung: str | None = None
        self.arrived = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, rec: Recorded) -> Response:
        if (rec.body or {}).get("model") != "summarizer":
            return Reply(content="Noted, here is more on that.")
        with self.lock:
            first = self.hung is None
            if first:
                self.hung = rec.headers.get("authorization", "")
                self.arrived.set()
        return Slow(60.0, content="never delivered") if first else Error(500, "summarizer down")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    with RedisCluster(tmp_path_factory.mktemp("cluster")) as nodes:
        yield nodes


def _worker(config_path: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "gateway", "worker", "--config", str(config_path)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _turn(gateway: GatewayProcess, thread: str, history: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    messages = [*history, {"role": "user", "content": text}]
    response = httpx.post(
        gateway.base_url + "/chat/completions", headers={"Authorization": f"Bearer {KEY}", "X-PCP-Thread": thread},
        json={"model": "fake-model", "messages": messages}, timeout=60,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    return [*messages, response.json()["choices"][0]["message"]]


def _conversation(gateways: list[GatewayProcess], thread: str, topic: str) -> None:
    history: list[dict[str, Any]] = []
    for turn in range(TURNS):
        history = _turn(gateways[turn % 2], thread, history, f"Question {turn} about {topic}: what should I watch for in step {turn}?")
    _turn(gateways[TURNS % 2], thread, history, "/save")


def _inspect(gateway: GatewayProcess, path: str) -> Any:
    response = httpx.get(gateway.root_url + path, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _start_all(processes: list[GatewayProcess]) -> None:
    """Start the gateways side by side (each takes seconds to import litellm on a loaded machine)."""
    with ThreadPoolExecutor(len(processes)) as pool:
        for started in [pool.submit(p.start) for p in processes]:
            started.result()


def test_two_gateways_and_two_workers_share_a_redis_cluster(cluster: RedisCluster, tmp_path: Path) -> None:
    prefix = "pcpcluster-" + uuid.uuid4().hex[:6]
    with FakeUpstream() as fake:
        fake.default = Summarizer()  # type: ignore[assignment]
        config = gateway_config(
            fake.url, tmp_path / "data", pcp={"recent_turns": 1, "merge_interval_hours": 1000, "embeddings": False, "summarizer_model": "summarizer", "summarizer_timeout_ms": 120_000},
            jobs={"workers": 0, "visibility_timeout_ms": 1500, "backoff_ms": 100},
        )  # fmt: skip
        config["store"] = {"redis_url": cluster.url, "cluster": True, "key_prefix": prefix, "data_dir": str(tmp_path / "data")}
        config["model_list"].append({"model_name": "summarizer", "litellm_params": {"model": "openai/summarizer", "api_base": fake.url, "api_key": "k", "timeout": 120}})
        workers = []
        for i in range(2):  # each worker calls the summarizer with a key of its own: the fake tells which one hung
            summarizer = {**config["model_list"][-1], "litellm_params": {**config["model_list"][-1]["litellm_params"], "api_key": f"worker-{i}"}}
            path = tmp_path / f"worker-{i}.yaml"
            path.write_text(yaml.safe_dump({**config, "model_list": [*config["model_list"][:-1], summarizer]}), encoding="utf-8")
            workers.append(_worker(path, tmp_path / f"worker-{i}.log"))
        client = ClusterClient.from_url(cluster.url, decode_responses=True)
        gateways = [GatewayProcess(config=config, workdir=tmp_path / name) for name in ("a", "b")]
        try:
            _start_all(gateways)
            first, second = gateways
            threads = [f"scale-{i}" for i in range(THREADS)]
            with ThreadPoolExecutor(THREADS) as pool:
                for done in [pool.submit(_conversation, gateways if i % 2 == 0 else gateways[::-1], t, TOPICS[i]) for i, t in enumerate(threads)]:
                    done.result()
            assert fake.default.arrived.wait(60), "no worker called the summarizer\n" + _logs(tmp_path)  # type: ignore[union-attr]
            doomed = workers[int(str(fake.default.hung).rsplit("-", 1)[-1])]  # type: ignore[union-attr]
            doomed.send_signal(signal.SIGKILL)  # mid-job: its summarizer call is still waiting
            doomed.wait()
            deadline = time.monotonic() + 120
            views: list[dict[str, Any]] = []
            for thread in threads:
                while (view := _inspect(first, f"/pcp/threads/{thread}"))["pending_jobs"]:
                    assert time.monotonic() < deadline, f"{thread}: jobs still pending\n" + _logs(tmp_path)
                    time.sleep(0.2)
                assert view == _inspect(second, f"/pcp/threads/{thread}"), f"{thread}: the gateways disagree"
                views.append(view)
            listed = [_inspect(g, "/pcp/threads?limit=100") for g in gateways]
            dead = client.xlen(f"{prefix}:{{jobs}}:dead")
            forgotten = httpx.delete(second.root_url + f"/pcp/threads/{threads[-1]}", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
            assert forgotten.status_code == 200, forgotten.text
            left = [k for k in client.scan_iter(match=f"{prefix}:*", count=1000) if f":{threads[-1]}}}" in k]
            relisted = sorted(t["id"] for t in _inspect(first, "/pcp/threads?limit=100")["data"])
        finally:
            for gateway in gateways:
                gateway.stop()
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
                    worker.wait(timeout=30)
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            for key in keys:
                client.delete(key)
            client.close()
    assert listed[0] == listed[1] and sorted(t["id"] for t in listed[0]["data"]) == threads, json.dumps(listed)[:2000]
    assert dead == 0, _logs(tmp_path)
    assert not left and relisted == threads[:-1], left
    for thread, view in zip(threads, views):
        originals = [c["id"] for page in view["pages"] for c in page.get("children", [])] + [p["id"] for p in view["pages"] if not p.get("children")]
        assert len(originals) == len(set(originals)) == TURNS, f"{thread}: {json.dumps(view)[:3000]}"
        assert view["consolidated_pages"] >= 1, f"{thread}: {json.dumps(view)[:3000]}"


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(tmp_path.rglob("*.log")) if "node-" not in str(p))
