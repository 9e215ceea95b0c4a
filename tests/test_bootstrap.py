"""What opening the services leaves in the process (gateway.bootstrap.open_services)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from gateway.bootstrap import open_services
from gateway.config import parse_config
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import gateway_config


@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")  # litellm's router, built once
def test_what_the_process_holds_once_started_is_out_of_the_collectors_way(fake: FakeUpstream, tmp_path: Path) -> None:
    """The modules, litellm's model map and router: frozen (gc.freeze), a full collection does not walk them again."""
    config = parse_config(gateway_config(fake.url, tmp_path / "data", pcp={"embeddings": False, "consolidation": False}))

    async def frozen() -> int:
        async with open_services(config):
            return gc.get_freeze_count()

    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        assert asyncio.run(frozen()) > 50_000  # (a started process holds ~400,000 objects)
    finally:
        gc.unfreeze()
