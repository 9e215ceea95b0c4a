"""Shared fixtures: the scripted upstream, a running gateway, and a clean Redis key space."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import redis

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config


@pytest.fixture(autouse=True)
def _sdk_clients_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every OpenAI or Anthropic SDK client a test makes is closed when the test ends. The SDKs close their
    connections only when a client is collected, and one caught in a reference cycle is collected by a later
    garbage-collection pass, in whatever test runs then: its socket's ResourceWarning failed that test."""
    made: list[Any] = []
    for cls in (openai.OpenAI, anthropic.Anthropic):
        def tracked(self: Any, *args: Any, _init: Any = cls.__init__, **kwargs: Any) -> None:
            _init(self, *args, **kwargs)
            made.append(self)

        monkeypatch.setattr(cls, "__init__", tracked)
    yield
    for client in made:
        client.close()


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
