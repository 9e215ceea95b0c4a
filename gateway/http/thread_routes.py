"""`GET /pcp/threads` (a tenant's threads, paginated) and `DELETE /pcp/threads/{thread}` (forget one).

The tenant is the caller's (`gateway.http.auth`): a key reaches only its own tenant's threads, the
master key those of the tenant it names in `X-PCP-Tenant`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.adapters.store_keys import ThreadKey
from gateway.errors import InvalidRequest
from gateway.http.auth import principal_of
from gateway.http.edge import AppState
from gateway.service.identity import path_thread

__all__ = ["int_param", "thread_routes"]

MAX_LIMIT = 100


def int_param(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    """A whole-number query parameter within [low, high], ``default`` when absent or empty; else a 400."""
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:  # "²".isdigit(), but int("²") fails
        raise InvalidRequest(f"{name} must be a whole number from {low} to {high}; got {raw[:40]!r}", param=name)
    return int(raw)


def thread_routes(state: AppState) -> list[Route]:
    async def list_threads(request: Request) -> Response:
        assert state.admin is not None
        limit = int_param(request, "limit", 20, 1, MAX_LIMIT)
        offset = int_param(request, "offset", 0, 0, 10**9)
        assert limit is not None and offset is not None
        return JSONResponse(await state.admin.threads(principal_of(request).tenant, offset, limit))

    async def delete_thread(request: Request) -> Response:
        assert state.admin is not None
        thread = ThreadKey(principal_of(request).tenant, path_thread(request.path_params["thread"]))
        return JSONResponse(await state.admin.forget(thread))

    return [
        Route("/pcp/threads", list_threads, methods=["GET"]),
        Route("/pcp/threads/{thread}", delete_thread, methods=["DELETE"]),
    ]
