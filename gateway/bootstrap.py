"""The composition root: builds every component from the config, and nothing else does.

`build_app(config)` returns the ASGI app; its lifespan opens the store (embedded Redis
or `store.redis_url` / `REDIS_URL`), builds the litellm-backed upstream and the chat
service, and closes them in reverse order on shutdown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from starlette.applications import Starlette

from gateway.adapters.embedded_redis import EmbeddedRedis
from gateway.adapters.embedder import MiniLMEmbedder
from gateway.adapters.redis_store import RedisStore, open_redis
from gateway.adapters.upstream import LiteLLMUpstream, Upstream
from gateway.config import GatewayConfig
from gateway.http.app import AppState, create_app
from gateway.service.chat import ChatService

__all__ = ["build_app", "redis_url_for"]

log = logging.getLogger("gateway")


def redis_url_for(config: GatewayConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The external Redis to use, or None for the embedded one."""
    return config.store.redis_url or environ.get("REDIS_URL") or None


def build_app(config: GatewayConfig, *, upstream: Upstream | None = None) -> Starlette:
    state = AppState(models=config.model_names, max_body_bytes=config.server.max_body_bytes)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        embedded: EmbeddedRedis | None = None
        embedder = MiniLMEmbedder(quantized=config.pcp.embedding_int8) if config.pcp.embeddings else None
        url = redis_url_for(config)
        if url is None:
            embedded = EmbeddedRedis(config.store.data_dir)
            url = embedded.start()
        store = RedisStore(open_redis(url, cluster=config.store.cluster), prefix=config.store.key_prefix)
        try:
            if not await store.ping():
                log.warning("redis at %s does not answer yet; /healthz will say so", url)
            state.ping = store.ping
            if embedder is not None:
                embedder.start_loading()
            state.chat = ChatService(upstream or LiteLLMUpstream(config), store, config, embedder)
            log.info("serving models: %s", ", ".join(config.model_names))
            yield
        finally:
            state.chat = None
            state.ping = None
            await store.close()
            if embedder is not None:
                embedder.close()
            if embedded is not None:
                embedded.stop()
                log.info("embedded redis stopped")

    return create_app(state, lifespan)
