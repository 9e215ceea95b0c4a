"""Gateways shared by more than one module of tests/http (each start imports litellm and loads the embedding
model: seconds of CPU on a loaded machine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config

API_BUDGET = 1200


@pytest.fixture(scope="package")
def api_gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One paged gateway for the Messages API and Responses API suites (test_messages_api.py,
    test_responses_api.py): the same config, and every test there sends to a thread of its own (a uuid, or
    `meta-thread` in pass-through, which stores nothing) under its module's own key."""
    workdir = tmp_path_factory.mktemp("api")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": API_BUDGET, "recent_turns": 2, "max_rounds": 3})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process
