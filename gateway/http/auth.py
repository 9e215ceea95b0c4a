"""Who may call the gateway: configured keys, their tenants, models and rates, and the open gateway's limits.

With `general_settings.master_key` or a `keys:` list configured, every route but `/healthz` needs a key
(`Authorization: Bearer <key>`, or Anthropic's `x-api-key`): no key or an unknown one is a 401, a model
outside the key's `models` a 403, a request over its `rpm` a 429. A key's requests belong to its
configured tenant, whose pages are a key space of their own (`gateway.adapters.store_keys`); the master
key may act for any tenant by naming it in `X-PCP-Tenant` (else it is tenant `master`) and is the only
key that reads `/metrics`. Keys are compared in constant time and never logged.

Without keys the gateway is open: the tenant is derived from whatever key a client sends (today's
behaviour), and it binds only to loopback unless `server.allow_open: true`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.adapters.rate_limit import RateLimiter
from gateway.config import TENANT_NAME, GatewayConfig
from gateway.errors import Forbidden, GatewayError, InvalidRequest, RateLimited, Unauthorized
from gateway.service.identity import key_tenant
from gateway.service.request import RequestStats

__all__ = ["Access", "AuthMiddleware", "Principal", "exposure_problem", "open_warning", "principal_of", "presented_key"]


MASTER_TENANT = "master"
PUBLIC_PATHS = frozenset({"/healthz", "/pcp/ui", "/pcp/ui/app.js", "/pcp/ui/app.css"})  # the inspector page holds no data
_SCOPE_KEY = "pcp.principal"


@dataclass(frozen=True)
class Principal:
    """The caller a key stands for. `models` None: every model; `rpm` None: no limit of its own."""

    tenant: str
    models: frozenset[str] | None = None
    rpm: int | None = None
    key_id: str = ""  # a digest of the key (rate-limit bucket); never the key
    master: bool = False


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    principal: Principal


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def presented_key(headers: Headers) -> str | None:
    """The key a client sent: Anthropic's `x-api-key`, else a bearer `Authorization`."""
    api_key = headers.get("x-api-key", "").strip()
    if api_key:
        return api_key
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


class Access:
    """The configured keys, and the per-key rate limiter once the store is open."""

    def __init__(self, config: GatewayConfig) -> None:
        entries = [
            _Entry(_digest(k.key), Principal(k.tenant, frozenset(k.models) if k.models is not None else None, k.rpm, _digest(k.key).hex()[:16]))
            for k in config.keys
        ]
        master = config.general_settings.master_key
        if master:
            entries.append(_Entry(_digest(master), Principal(MASTER_TENANT, key_id=_digest(master).hex()[:16], master=True)))
        self._entries = tuple(entries)
        self.limiter: RateLimiter | None = None

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    def identify(self, headers: Headers) -> Principal:
        """The caller, or Unauthorized. Every configured key is compared, each in constant time."""
        if not self.enabled:
            return _open_principal(headers)
        key = presented_key(headers)
        if key is None:
            raise Unauthorized("Missing API key: send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>').")
        digest = _digest(key)
        found: Principal | None = None
        for entry in self._entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry.principal
        if found is None:
            raise Unauthorized("Incorrect API key provided.")
        if found.master:
            tenant = headers.get("x-pcp-tenant", "").strip()
            if tenant and not TENANT_NAME.fullmatch(tenant):
                raise InvalidRequest("X-PCP-Tenant must be a tenant name (1-64 of A-Z a-z 0-9 . _ -)", param="X-PCP-Tenant")
            if tenant:
                found = Principal(tenant, key_id=found.key_id, master=True)
        return found

    async def admit(self, request: Request, model: str) -> None:
        """A model call by the request's caller: its model list, then its rate (counted only when allowed)."""
        principal = principal_of(request)
        if principal.models is not None and model not in principal.models:
            allowed = ", ".join(sorted(principal.models)) or "none"
            raise Forbidden(f"This key may not use model {model!r}; it may use: {allowed}.", param="model", code="model_not_allowed")
        if principal.rpm is not None and self.limiter is not None:
            wait = await self.limiter.acquire(principal.key_id, principal.rpm)
            if wait is not None:
                seconds = max(1, int(wait + 0.999))
                raise RateLimited(
                    f"Rate limit reached for this key: {principal.rpm} requests per minute. Try again in {seconds} s.",
                    headers={"retry-after": str(seconds)},
                )


def principal_of(request: Request) -> Principal:
    """The caller the middleware identified (the open gateway's anonymous caller on an unguarded path)."""
    principal = request.scope.get(_SCOPE_KEY)
    return principal if isinstance(principal, Principal) else _open_principal(request.headers)


def _open_principal(headers: Headers) -> Principal:
    """The caller of an open gateway: a tenant per key sent (`x-api-key` counts as the same bearer key)."""
    api_key = headers.get("x-api-key", "").strip()
    return Principal(key_tenant(f"Bearer {api_key}" if api_key else headers.get("authorization")))


class AuthMiddleware:
    """Identifies the caller of every HTTP request (but `PUBLIC_PATHS`); `/metrics` needs the master key."""

    def __init__(self, app: ASGIApp, access: Access, render: Callable[[Scope, GatewayError], Response]) -> None:
        self.app = app
        self.access = access
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            principal = self.access.identify(Headers(scope=scope))
            if scope["path"] == "/metrics" and self.access.enabled and not principal.master:
                raise Forbidden("/metrics needs the master key (general_settings.master_key).")
        except GatewayError as exc:
            stats = scope.get("pcp.stats")
            if isinstance(stats, RequestStats):
                stats.error = exc.code or exc.type
            await self.render(scope, exc)(scope, receive, send)
            return
        scope[_SCOPE_KEY] = principal
        await self.app(scope, receive, send)


def _loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_problem(config: GatewayConfig, host: str) -> str | None:
    """Why the gateway must not start on `host` (an open gateway on a non-loopback address), or None."""
    if config.auth_enabled or config.server.allow_open or _loopback(host):
        return None
    return (
        f"refusing to serve on {host} without keys: anyone who can reach it could use your models and read every "
        "thread. Configure general_settings.master_key or keys: (docs/operations.md, 'Keys and tenants'), bind 127.0.0.1, "
        "or set server.allow_open: true to serve open on purpose."
    )


def open_warning(config: GatewayConfig, host: str, port: int) -> str | None:
    """What to say at start when the gateway is open."""
    if config.auth_enabled:
        return None
    return f"no keys configured: the gateway is open to anyone who can reach {host}:{port} (see docs/operations.md, 'Keys and tenants')"
