"""The inspection routes beyond `GET /pcp/threads/{thread}`, and the inspector page that reads them.

- `GET /pcp/threads/{thread}/pages/{page}`: one page whole, content included;
- `GET /pcp/threads/{thread}/context?q=...&budget=...&model=...`: the context the question would be sent
  upstream with (the system message, every message, the token count), built without calling the chat model,
  storing a page or changing the thread's zoom state;
- `GET /pcp/ui` and its two assets: a page (plain HTML, CSS and JS served from `gateway/http/ui`, no build
  step, nothing fetched from elsewhere) over these routes.

The tenant is the caller's (`gateway.http.auth`), as on every route; the page itself holds no data and loads
without a key (a browser cannot send one for a page), its script sends the key on every call.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.adapters.store_keys import ThreadKey
from gateway.http.auth import principal_of
from gateway.http.edge import AppState, request_meta
from gateway.http.thread_routes import int_param
from gateway.service.identity import MAX_BUDGET, path_thread, request_time

__all__ = ["inspect_routes"]

_ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
_NOT_FOUND = {"error": {"message": "no such page in this thread", "type": "invalid_request_error", "param": "page", "code": "not_found"}}


def _thread(request: Request) -> ThreadKey:
    return ThreadKey(principal_of(request).tenant, path_thread(request.path_params["thread"]))


def _asset(name: str) -> str:
    return files("gateway.http").joinpath("ui", name).read_text(encoding="utf-8")


def inspect_routes(state: AppState) -> list[Route]:
    async def page(request: Request) -> Response:
        assert state.threads is not None
        found = await state.threads.page(_thread(request), request.path_params["page"])
        return JSONResponse(found) if found is not None else JSONResponse(_NOT_FOUND, status_code=404)

    async def context(request: Request) -> Response:
        assert state.threads is not None
        params = request.query_params
        budget = int_param(request, "budget", None, 1, MAX_BUDGET)
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
        Route("/pcp/threads/{thread}/pages/{page}", page, methods=["GET"]),
        Route("/pcp/threads/{thread}/context", context, methods=["GET"]),
        Route("/pcp/ui", ui, methods=["GET"]),
        Route("/pcp/ui/{name}", asset, methods=["GET"]),
    ]
