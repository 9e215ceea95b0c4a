"""The embedded Redis: real server, persistence, clean shutdown, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import redis

from gateway.adapters.embedded_redis import EmbeddedRedis
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config


def _redis_children(data_dir: Path) -> list[int]:
    """pids of redis-server processes serving this data directory."""
    out = subprocess.run(["pgrep", "-f", f"redis-server unixsocket:{data_dir}"], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def _wait_gone(data_dir: Path, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _redis_children(data_dir):
        time.sleep(0.05)
    return _redis_children(data_dir)


def test_data_survives_a_restart_and_nothing_is_left_running(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "data")
    url = server.start()
    client = redis.Redis.from_url(url)
    client.set("answer", "42")
    client.close()
    server.stop()
    assert _wait_gone(server.data_dir) == []

    again = EmbeddedRedis(tmp_path / "data")
    client = redis.Redis.from_url(again.start())
    try:
        assert client.get("answer") == b"42"
    finally:
        client.close()
        again.stop()


def test_a_second_process_on_the_same_directory_attaches(tmp_path: Path) -> None:
    owner = EmbeddedRedis(tmp_path / "data")
    url = owner.start()
    other = EmbeddedRedis(tmp_path / "data")
    try:
        assert other.start() == url
        assert not other.owner
        other.stop()  # an attached process does not stop the owner's server
        client = redis.Redis.from_url(url)
        assert client.ping()
        client.close()
    finally:
        owner.stop()


def test_a_long_data_dir_path_still_gets_a_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedRedis(deep)
    client = redis.Redis.from_url(server.start())
    try:
        assert client.ping()
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_gateway_leaves_no_redis_behind(fake: FakeUpstream, tmp_path: Path, sig: int) -> None:
    config = gateway_config(fake.url, tmp_path / "data", embedded=True)
    gateway = GatewayProcess(config=config, workdir=tmp_path).start()
    data_dir = (tmp_path / "data").resolve()
    assert len(_redis_children(data_dir)) == 1
    assert httpx.get(gateway.root_url + "/healthz").json()["redis"] is True
    gateway.stop(sig)
    assert _wait_gone(data_dir) == [], "the embedded redis-server outlived the gateway"


def test_gateway_restart_keeps_the_store(fake: FakeUpstream, tmp_path: Path) -> None:
    config = gateway_config(fake.url, tmp_path / "data", embedded=True)
    with GatewayProcess(config=config, workdir=tmp_path):
        url = (tmp_path / "data" / "redis.url").read_text().strip()
        client = redis.Redis.from_url(url)
        client.set("kept", "yes")
        client.close()
    assert not (tmp_path / "data" / "redis.url").exists()
    with GatewayProcess(config=config, workdir=tmp_path):
        client = redis.Redis.from_url((tmp_path / "data" / "redis.url").read_text().strip())
        assert client.get("kept") == b"yes"
        client.close()


def test_embedded_is_not_used_when_redis_url_is_set(fake: FakeUpstream, tmp_path: Path) -> None:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is not set")
    config = gateway_config(fake.url, tmp_path / "data")
    with GatewayProcess(config=config, workdir=tmp_path) as gateway:
        assert httpx.get(gateway.root_url + "/healthz").json()["redis"] is True
        assert _redis_children((tmp_path / "data").resolve()) == []
