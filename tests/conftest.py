"""Shared fixtures: the scripted upstream, a running gateway, and a clean Redis key space."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config


@pytest.fixture(scope="session")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture
def upstream(fake: FakeUpstream) -> FakeUpstream:
    """The session's scripted upstream, emptied for this test."""
    fake.reset()
    return fake


def _drop_prefix(config: dict[str, object]) -> None:
    store = config["store"]
    assert isinstance(store, dict)
    url = store.get("redis_url")
    if url:
        client = redis.Redis.from_url(str(url))
        try:
            keys = list(client.scan_iter(match=f"{store['key_prefix']}:*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


@pytest.fixture(scope="session")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One real gateway for the session, against the scripted upstream."""
    workdir = tmp_path_factory.mktemp("gateway")
    config = gateway_config(fake.url, workdir / "data")
    process = GatewayProcess(config=config, workdir=workdir)
    with process:
        yield process
    _drop_prefix(config)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def external_redis_url() -> str | None:
    return os.environ.get("REDIS_URL") or None
