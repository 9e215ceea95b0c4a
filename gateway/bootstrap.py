"""The composition root: builds every component from the config, and nothing else does.

`build_app(config)` returns the ASGI app; its lifespan opens the store (embedded Redis
or `store.redis_url` / `REDIS_URL`), the embedder, the litellm-backed upstream, the job
queue and the consolidator, starts the in-process workers, and closes everything in
reverse order on shutdown. `run_worker` builds the same services for `pcp-gateway worker`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from starlette.applications import Starlette

from gateway.adapters.embedded_redis import EmbeddedRedis
from gateway.adapters.embedder import EmbedObserver, MiniLMEmbedder, OnnxEmbedder, user_embedder
from gateway.adapters.embedding_models import user_model
from gateway.adapters.redis_store import RedisStore, open_redis
from gateway.adapters.response_store import ResponseStore
from gateway.adapters.segmenter import JiebaSegmenter
from gateway.adapters.job_queue import JobQueue
from gateway.adapters.upstream import AttemptObserver, LiteLLMUpstream, Upstream
from gateway.config import GatewayConfig
from gateway.core.scripts import install_segmenter, installed_segmenter
from gateway.adapters.rate_limit import RateLimiter
from gateway.http.app import AppState, create_app
from gateway.http.auth import Access
from gateway.http.metrics import GatewayMetrics
from gateway.service.background import Background
from gateway.service.chat import ChatService
from gateway.service.consolidator import Consolidator
from gateway.service.forgetting import ThreadAdmin
from gateway.service.inspection import ThreadInspector
from gateway.service.responses import ResponseMemory

__all__ = ["build_app", "open_services", "redis_url_for", "run_worker"]

log = logging.getLogger("gateway")


def redis_url_for(config: GatewayConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The external Redis to use, or None for the embedded one."""
    return config.store.redis_url or environ.get("REDIS_URL") or None


@dataclass
class Services:
    """Everything a process builds from the config, once."""

    store: RedisStore
    upstream: Upstream
    embedder: OnnxEmbedder | None
    consolidator: Consolidator | None
    queue: JobQueue


def embedder_for(config: GatewayConfig, on_embed: EmbedObserver | None = None) -> OnnxEmbedder:
    """The shipped model, or the one `pcp.embedding_model` points at (a ConfigError when it is no model)."""
    if config.pcp.embedding_model is None:
        return MiniLMEmbedder(quantized=config.pcp.embedding_int8, on_embed=on_embed)
    return user_embedder(user_model(config.pcp.embedding_model), quantized=config.pcp.embedding_int8, on_embed=on_embed)


@asynccontextmanager
async def open_services(
    config: GatewayConfig, upstream: Upstream | None = None, *, embed: bool = True, on_attempts: AttemptObserver | None = None,
    on_embed: EmbedObserver | None = None,
) -> AsyncIterator[Services]:
    """Open the store (embedded Redis or a URL), the embedder (unless ``embed`` is false: a command that only
    reads the store; what it computes told to ``on_embed``), the upstream (its retries and fallbacks told to
    ``on_attempts``) and the consolidator; install the Chinese segmenter (gateway.core.scripts)."""
    if installed_segmenter() is None:  # every process cuts Chinese alike: terms stored by one are matched by another
        install_segmenter(JiebaSegmenter())  # loads its dictionary only when Chinese is first seen
    embedded: EmbeddedRedis | None = None
    url = redis_url_for(config)
    if url is None:
        embedded = EmbeddedRedis(config.store.data_dir)
        url = embedded.start()
    client = open_redis(url, cluster=config.store.cluster)
    store = RedisStore(client, prefix=config.store.key_prefix)
    embedder = embedder_for(config, on_embed) if config.pcp.embeddings and embed else None
    upstream = upstream or LiteLLMUpstream(config, on_attempts=on_attempts)
    jobs = config.jobs
    queue = JobQueue(
        client, prefix=config.store.key_prefix, visibility_timeout_ms=jobs.visibility_timeout_ms,
        max_attempts=jobs.max_attempts, backoff_ms=jobs.backoff_ms,
    )  # fmt: skip
    consolidator = Consolidator(store, queue, upstream, embedder, config.pcp) if config.pcp.consolidation else None
    try:
        if not await store.ping():
            log.warning("redis at %s does not answer yet; /healthz will say so", url)
        if embedder is not None:
            embedder.start_loading()
        _freeze_heap()
        yield Services(store, upstream, embedder, consolidator, queue)
    finally:
        await store.close()
        if embedder is not None:
            embedder.close()
        if embedded is not None:
            embedded.stop()
            log.info("embedded redis stopped")


def _freeze_heap() -> None:
    """What the process holds once its services are open (its modules, litellm's model map and router, the config)
    lives as long as it does: frozen out of the collector's way (`gc.freeze`), a full collection walks only what
    requests made since. Otherwise each walked ~420,000 objects (160-240 ms), and on a long thread one came every few
    requests: a 10,000-exchange body's messages outlive the young generations and count toward the next."""
    gc.collect()
    gc.freeze()


def background_for(config: GatewayConfig, services: Services, workers: int) -> Background | None:
    if services.consolidator is None:
        return None
    return Background(
        services.queue, services.consolidator, workers=workers, merge_interval_hours=config.pcp.merge_interval_hours,
        shutdown_grace_s=config.jobs.shutdown_grace_ms / 1000,
    )  # fmt: skip


def build_app(config: GatewayConfig, *, upstream: Upstream | None = None) -> Starlette:
    access = Access(config)
    metrics = GatewayMetrics()
    state = AppState(models=config.model_names, max_body_bytes=config.server.max_body_bytes, access=access, metrics=metrics)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_services(config, upstream, on_attempts=metrics.upstream_attempts, on_embed=metrics.embedding) as services:
            background = background_for(config, services, config.jobs.workers)
            if background is not None:
                await background.start()
            state.ping = services.store.ping
            state.chat = ChatService(services.upstream, services.store, config, services.embedder, services.consolidator)
            state.threads = ThreadInspector(
                services.store, services.consolidator, state.chat.builder, config.model_names, config.budget_for
            )
            state.admin = ThreadAdmin(services.store, services.consolidator)
            access.limiter = RateLimiter(services.store.client, config.store.key_prefix)
            queue = services.queue

            async def probe() -> tuple[dict[str, int], float | None]:
                return await queue.depth(), await queue.oldest()

            state.queue_probe = probe
            ttl = int(config.store.responses_ttl_hours * 3600)
            state.responses = ResponseMemory(ResponseStore(services.store.client, config.store.key_prefix, ttl))
            log.info("serving models: %s", ", ".join(config.model_names))
            try:
                yield
            finally:
                state.chat = state.threads = None
                state.admin = None
                access.limiter = None
                state.queue_probe = None
                state.responses = None
                state.ping = None
                if background is not None:
                    await background.stop()

    return create_app(state, lifespan)


async def run_worker(config: GatewayConfig, stop: asyncio.Event, workers: int = 1) -> None:
    """`pcp-gateway worker`: consolidation workers (and the schedule) without the HTTP server."""
    async with open_services(config) as services:
        background = background_for(config, services, workers)
        if background is None:
            log.warning("pcp.consolidation is off: this worker has nothing to do")
            await stop.wait()
            return
        await background.start()
        log.info("worker running (%d in this process)", workers)
        await stop.wait()
        await background.stop()
