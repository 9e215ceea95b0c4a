"""The inspection routes beyond `GET /pcp/threads/{thread}`, and the inspector page that reads them.

- `GET /pcp/threads`: the caller's threads (`limit`, `offset`), most recently stored first;
- `GET /pcp/threads/{thread}/pages/{page}`: one page whole, content included;
- `GET /pcp/threads/{thread}/context?q=...&budget=...&model=...`: the context the question would be sent
  upstream with (the system message, every message, the token count), built without calling the chat model,
  storing a page or changing the thread's zoom state;
- `GET /pcp/ui` and its two assets: a page (plain HTML, CSS and JS served from `gateway/http/ui`, no build
  step, nothing fetched from elsewhere) over these routes.

The tenant is the caller's API key, as on every route.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.adapters.store_keys import ThreadKey
from gateway.errors import InvalidRequest
from gateway.http.edge import AppState, request_meta
from gateway.service.identity import MAX_BUDGET, request_time, tenant_of

__all__ = ["inspect_routes"]

MAX_LIMIT = 100
_ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
_NOT_FOUND = {"error": {"message": "no such page in this thread", "type": "invalid_request_error", "param": "page", "code": "not_found"}}


def _int_param(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidRequest(f"{name} must be a whole number from {low} to {high}; got {raw[:40]!r}", param=name)
    return int(raw)


def _thread(request: Request) -> ThreadKey:
    return ThreadKey(tenant_of(request_meta(request).authorization), request.path_params["thread"])


def _asset(name: str) -> str:
    return files("gateway.http").joinpath("ui", name).read_text(encoding="utf-8")


def inspect_routes(state: AppState) -> list[Route]:
    async def list_threads(request: Request) -> Response:
        assert state.threads is not None
        limit = _int_param(request, "limit", 20, 1, MAX_LIMIT)
        offset = _int_param(request, "offset", 0, 0, 10**9)
        assert limit is not None and offset is not None
        tenant = tenant_of(request_meta(request).authorization)
        return JSONResponse(await state.threads.threads(tenant, offset, limit))

    async def page(request: Request) -> Response:
        assert state.threads is not None
        found = await state.threads.page(_thread(request), request.path_params["page"])
        return JSONResponse(found) if found is not None else JSONResponse(_NOT_FOUND, status_code=404)

    async def context(request: Request) -> Response:
        assert state.threads is not None
        params = request.query_params
        budget = _int_param(request, "budget", None, 1, MAX_BUDGET)
        now = request_time(request_meta(request).time)
        return JSONResponse(await state.threads.context(_thread(request), params.get("q", ""), budget, params.get("model") or None, now))

    async def ui(request: Request) -> Response:
        return Response(_asset("index.html"), media_type="text/html; charset=utf-8", headers={"cache-control": "no-cache"})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return JSONResponse({"error": {"message": f"no asset {name!r}", "type": "invalid_request_error", "param": None, "code": "not_found"}}, status_code=404)
        return Response(_asset(name), media_type=_ASSETS[name], headers={"cache-control": "no-cache"})

    return [
        Route("/pcp/threads", list_threads, methods=["GET"]),
        Route("/pcp/threads/{thread}/pages/{page}", page, methods=["GET"]),
        Route("/pcp/threads/{thread}/context", context, methods=["GET"]),
        Route("/pcp/ui", ui, methods=["GET"]),
        Route("/pcp/ui/{name}", asset, methods=["GET"]),
    ]
