"""Prometheus metrics: what the gateway counts, in a registry of its own, and `GET /metrics`.

Per request (recorded by `gateway.http.observe` when the response has been sent): requests and latency
by route, model and form (raw / paged / pass-through / local), upstream rounds, pages the model
consulted or shelved, the tokens the gateway sent upstream against the raw history tokens they replaced,
requests whose `pcp.router_model` failed (the heuristic chose), and Redis errors. Per upstream call (told
by the upstream adapter): the retries and the fallbacks to another model that litellm's Router made. Per call of
the embedder: the texts it ran the model on, and those whose vector it held already. At each
scrape: the job queue's depth (queued, held, retrying, dead) and the age of its oldest job, read from Redis,
so every process reports the shared queue. With keys configured,
`/metrics` needs the master key (`gateway.http.auth`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import StoreUnavailable
from gateway.service.request import RequestStats

__all__ = ["GatewayMetrics", "QueueProbe", "metrics_route"]

log = logging.getLogger("gateway.metrics")

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
ROUND_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 12)

# the job queue as a scrape sees it: depth by state, and the enqueue time of its oldest job (None: empty)
QueueProbe = Callable[[], Awaitable[tuple[dict[str, int], float | None]]]


class GatewayMetrics:
    """The gateway's metrics, registered in their own registry (so two apps in one process never clash)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("pcp_requests", "HTTP requests served", ["route", "model", "form", "status"], registry=r)
        self.latency = Histogram(
            "pcp_request_seconds", "Time to serve a request, streaming included", ["route", "model", "form"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.rounds = Histogram("pcp_upstream_rounds", "Upstream calls per model request", ["model", "form"], buckets=ROUND_BUCKETS, registry=r)
        self.zoom = Counter("pcp_zoom_pages", "Pages the model consulted or shelved (one per id of a Consult / Shelve call)", ["action"], registry=r)
        self.prompt_tokens = Counter("pcp_prompt_tokens", "Tokens the gateway sent upstream (first round, by its own count)", ["model", "form"], registry=r)
        self.history_tokens = Counter("pcp_history_tokens", "Tokens of the raw thread history those requests stood for", ["model", "form"], registry=r)
        self.retries = Counter("pcp_upstream_retries", "Upstream calls litellm's Router retried (num_retries) before one succeeded", ["model"], registry=r)
        self.fallbacks = Counter("pcp_upstream_fallbacks", "Upstream calls answered by a fallback model (fallbacks) after the asked one failed", ["model"], registry=r)
        self.router_fallbacks = Counter(
            "pcp_router_model_fallbacks", "Paged requests whose pcp.router_model failed or timed out (the heuristic chose the pages)", ["model"], registry=r
        )
        self.over_budget = Counter(
            "pcp_over_budget", "Paged requests over their budget (their client's own parts left the history less than pcp.history_floor)", ["model"], registry=r
        )
        self.embedded = Counter("pcp_embedding_texts", "Texts the embedding model ran on (one forward pass each)", registry=r)
        self.embedding_kept = Counter(
            "pcp_embedding_kept", "Texts whose vector the process held already (asked for before: a question stored with its exchange, a retry)", registry=r
        )
        self.redis_errors = Counter("pcp_redis_errors", "Requests or scrapes that failed because Redis did not answer", registry=r)
        self.jobs = Gauge("pcp_jobs", "Background jobs by state (queued: not yet finished; held: by a worker now)", ["state"], registry=r)
        self.job_age = Gauge("pcp_job_oldest_age_seconds", "Age of the oldest unfinished job (0 when none)", registry=r)
        self.job_failures = Gauge("pcp_jobs_dead", "Jobs moved to the dead letters after their last attempt (kept, capped)", registry=r)

    def upstream_attempts(self, model: str, retries: int, fallbacks: int) -> None:
        """An upstream call succeeded after `retries` retries and `fallbacks` fallbacks (litellm's Router)."""
        if retries:
            self.retries.labels(model).inc(retries)
        if fallbacks:
            self.fallbacks.labels(model).inc(fallbacks)

    def embedding(self, computed: int, kept: int) -> None:
        """The embedder ran the model on ``computed`` texts and gave ``kept`` vectors it held already."""
        if computed:
            self.embedded.inc(computed)
        if kept:
            self.embedding_kept.inc(kept)

    def observe(self, route: str, status: int, seconds: float, stats: RequestStats) -> None:
        model, form = stats.model or "", stats.form or ""
        self.requests.labels(route, model, form, str(status)).inc()
        self.latency.labels(route, model, form).observe(seconds)
        if stats.rounds is not None:
            self.rounds.labels(model, form).observe(stats.rounds)
        if stats.consults:
            self.zoom.labels("Consult").inc(stats.consults)
        if stats.shelves:
            self.zoom.labels("Shelve").inc(stats.shelves)
        if stats.prompt_tokens is not None:
            self.prompt_tokens.labels(model, form).inc(stats.prompt_tokens)
        if stats.history_tokens is not None:
            self.history_tokens.labels(model, form).inc(stats.history_tokens)
        if stats.router_fallback:
            self.router_fallbacks.labels(model).inc()
        if stats.over_budget:
            self.over_budget.labels(model).inc()
        if stats.error == StoreUnavailable.code or stats.degraded == "store-unavailable":
            self.redis_errors.inc()

    async def scrape(self, probe: QueueProbe | None, now: float) -> bytes:
        if probe is not None:
            try:
                depth, oldest = await probe()
            except StoreUnavailable as exc:
                log.warning("metrics: the job queue could not be read: %s", exc.message)
                self.redis_errors.inc()
            else:
                self.jobs.labels("queued").set(depth["stream"] + depth["delayed"])
                self.jobs.labels("held").set(depth["pending"])
                self.jobs.labels("retrying").set(depth["delayed"])
                self.job_failures.set(depth["dead"])
                self.job_age.set(max(0.0, now - oldest) if oldest is not None else 0.0)
        return generate_latest(self.registry)


def metrics_route(metrics: GatewayMetrics, probe: Callable[[], QueueProbe | None], clock: Callable[[], float]) -> Route:
    async def serve(request: Request) -> Response:
        return Response(await metrics.scrape(probe(), clock()), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", serve, methods=["GET"])
