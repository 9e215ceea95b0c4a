"""The upstream model client: every call goes through a litellm `Router`.

This module is the only place that imports litellm. Requests and responses cross it
as OpenAI wire-format dicts; litellm's exceptions are translated here, once, into the
gateway's error tree.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import litellm
from litellm import exceptions as llm_errors
from litellm.router import Router
from litellm.types.router import RouterRateLimitError

from gateway.config import GatewayConfig
from gateway.errors import (
    ContextLengthExceeded,
    GatewayError,
    UpstreamAuthError,
    UpstreamBadRequest,
    UpstreamPermissionDenied,
    UpstreamRateLimited,
    UpstreamTimeout,
    UpstreamServerError,
    UpstreamUnavailable,
)

__all__ = [
    "Upstream", "LiteLLMUpstream", "AttemptObserver", "translate_error", "build_router", "check_router",
    "select_openai_path", "HTTP_HANDLER_SWITCH", "Advice", "missing_keys", "start_advice", "error_advice", "advised",
]  # fmt: skip

log = logging.getLogger("gateway.upstream")

litellm.telemetry = False
litellm.suppress_debug_info = True
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    # two INFO lines per call cost ~1 ms of CPU each request; litellm's warnings and errors still show
    logging.getLogger(_name).setLevel(logging.WARNING)


class Upstream(Protocol):
    """What the gateway needs from a model provider."""

    async def complete(self, model: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One non-streamed chat completion, as an OpenAI `chat.completion` dict."""
        ...

    def stream(self, model: str, params: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """A streamed chat completion, as OpenAI `chat.completion.chunk` dicts."""
        ...

    def context_window(self, model: str) -> int | None:
        """The model's input window in tokens, when known."""
        ...


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> dict[str, str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is not None:
        value = headers.get("retry-after")
        if value:
            return {"retry-after": str(value)}
    return {}


def translate_error(exc: BaseException) -> GatewayError:
    """Map a litellm/provider exception to the gateway error the client should see.

    The upstream's HTTP status decides first (litellm's exception classes do not always
    match it: a 401 can arrive as a BadRequestError); the class decides when there is
    no status, as for timeouts and connection failures.
    """
    if isinstance(exc, GatewayError):
        return exc
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    lowered = message.lower()
    if isinstance(exc, llm_errors.ContextWindowExceededError) or "context_length_exceeded" in message or "context length" in lowered:
        return ContextLengthExceeded(f"upstream: {message}")
    if "missing credentials" in lowered or "api_key client option must be set" in lowered:
        return UpstreamAuthError(f"no credentials for the upstream: {message}")
    if isinstance(exc, llm_errors.Timeout):
        return UpstreamTimeout(f"upstream timed out: {message}")
    if isinstance(exc, RouterRateLimitError):
        return UpstreamRateLimited(f"upstream rate limit: {message}", headers=_retry_after(exc))
    status = _status_of(exc)
    if status == 401 or (status is None and isinstance(exc, llm_errors.AuthenticationError)):
        return UpstreamAuthError(f"upstream rejected the credentials: {message}")
    if status == 403 or (status is None and isinstance(exc, llm_errors.PermissionDeniedError)):
        return UpstreamPermissionDenied(f"upstream denied access: {message}")
    if status == 429 or (status is None and isinstance(exc, llm_errors.RateLimitError)):
        return UpstreamRateLimited(f"upstream rate limit: {message}", headers=_retry_after(exc))
    if status in (408, 504):
        return UpstreamTimeout(f"upstream timed out: {message}")
    if status == 404:
        return UpstreamUnavailable(f"upstream does not know the configured model: {message}")
    if status is not None and 400 <= status < 500:
        return UpstreamBadRequest(f"upstream rejected the request: {message}")
    if status is None and isinstance(exc, (llm_errors.BadRequestError, llm_errors.UnprocessableEntityError, llm_errors.UnsupportedParamsError)):
        return UpstreamBadRequest(f"upstream rejected the request: {message}")
    if status is not None and status >= 500 and not isinstance(exc, llm_errors.APIConnectionError):  # that one says 500 too
        return UpstreamServerError(f"upstream failed: {message}")
    return UpstreamUnavailable(f"upstream failed: {message}")


# --- a first run without a key or an upstream: what to do, in one line ------------------------------------

QUICKSTART = "run scripts/quickstart to start a local model and the gateway together, no key needed (model qwen-local)"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def missing_keys(config: GatewayConfig) -> dict[str, tuple[str, ...]]:
    """The model_names with a deployment that has no credentials: no `api_key` (or an `os.environ/NAME` that was
    unset), no `api_base` of its own, and the provider's key variable (litellm's `validate_environment`) unset.
    Each with the variables that would give it one."""
    found: dict[str, tuple[str, ...]] = {}
    for entry in config.model_list:
        params = entry.litellm_params
        if params.get("api_key") or params.get("api_base"):
            continue
        try:
            missing = litellm.validate_environment(model=str(params["model"])).get("missing_keys") or []
        except Exception:  # litellm raises plain Exception for a provider it cannot tell; then nothing is said
            continue
        if missing:
            found[entry.model_name] = tuple(dict.fromkeys([*found.get(entry.model_name, ()), *map(str, missing)]))
    return found


def _local_bases(config: GatewayConfig) -> dict[str, str]:
    """model_name -> the `api_base` on this machine it is served from (a local model), for those that have one."""
    return {e.model_name: str(e.litellm_params["api_base"]) for e in config.model_list
            if urlsplit(str(e.litellm_params.get("api_base") or "")).hostname in LOOPBACK}


def _answers(base: str) -> bool:
    """Whether something accepts connections at ``base`` (a local server; checked once, at start)."""
    url = urlsplit(base)
    try:
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=0.3):
            return True
    except OSError:
        return False


def start_advice(config: GatewayConfig, answers: Callable[[str], bool] = _answers) -> list[str]:
    """What `serve` says at start, one line each, when some models cannot answer: no key, or no local server."""
    lines: list[str] = []
    local = _local_bases(config)
    running = [name for name, base in local.items() if answers(base)]
    keyless = missing_keys(config)
    if keyless:
        variables = ", ".join(dict.fromkeys(v for vs in keyless.values() for v in vs))
        other = f"ask for {running[0]} (a local model, running)" if running else QUICKSTART
        lines.append(f"{', '.join(keyless)} cannot answer: {variables} is not set. Set it and restart the gateway, "
                     f"or {other}")
    for name, base in local.items():
        if name not in running and not keyless:
            lines.append(f"{name}: nothing answers at {base} yet; start it (scripts/local-model start) before asking it")
    return lines


@dataclass(frozen=True)
class Advice:
    """What to do when a model fails: ``text`` starts the error's message. ``unreachable_only``: only when nothing
    answered (a local server that is not running), not when its server answered with an error of its own."""

    text: str
    unreachable_only: bool = False


def error_advice(config: GatewayConfig) -> dict[str, Advice]:
    """model_name -> what an upstream failure of that model says first: what to do about it."""
    advice = {name: Advice(f"{name} cannot answer: {', '.join(variables)} is not set. Set it and restart the "
                           f"gateway, or {QUICKSTART}.") for name, variables in missing_keys(config).items()}
    for name, base in _local_bases(config).items():
        advice.setdefault(name, Advice(f"nothing answers at {base} for {name}: start it (scripts/local-model start "
                                       "for the shipped qwen-local, or scripts/quickstart).", unreachable_only=True))
    return advice


def advised(error: GatewayError, advice: Advice | None) -> GatewayError:
    """``error`` with ``advice`` first in its message, when the failure is one it is about: the upstream was not
    reached or failed (502), or refused the credentials (401)."""
    if advice is None or not isinstance(error, (UpstreamUnavailable, UpstreamAuthError)):
        return error
    if advice.unreachable_only and "connect" not in error.message.lower():  # litellm: "Cannot connect to host …"
        return error
    return type(error)(f"{advice.text} ({error.message})", param=error.param, code=error.code, headers=error.headers)


# what an unpriced deployment is given (with the cache prices too: litellm warns, on its own handler, when a model
# outside its cost map has a price without them)
_PRICES = ("input_cost_per_token", "output_cost_per_token", "cache_creation_input_token_cost", "cache_read_input_token_cost")
# litellm's cost map as shipped: a Router adds the names of the models it is given (unpriced), so whether a
# model is in the map is asked of this copy of its keys, taken before any Router is built
_SHIPPED_PRICES = frozenset(litellm.model_cost)


def _priced(litellm_params: Mapping[str, Any], model_info: Mapping[str, Any]) -> bool:
    """Whether litellm has a price for a deployment: configured (a price, or a base model to price it as), or
    in its cost map as shipped (where a free model, as Ollama's, is an explicit zero)."""
    if "base_model" in model_info or any(key in source for source in (model_info, litellm_params) for key in _PRICES):
        return True
    try:
        known = litellm.get_model_info(model=str(litellm_params.get("model", "")))
    except Exception:  # litellm raises plain Exception (ModelNotMappedError) for a model it does not know
        return False
    return known.get("key") in _SHIPPED_PRICES


def build_router(config: GatewayConfig) -> Router:
    """The litellm Router of the configured model list. A deployment litellm has no price for (a local
    model, a self-hosted endpoint, a name not in its cost map) is priced at zero: with no price, litellm runs
    a "zero cost" diagnostic after every call that walks the deployment's model info (~1.2 ms of CPU per
    call on bench/overhead.py's model), and the gateway uses no cost. A configured price is kept."""
    model_list = []
    for e in config.model_list:
        info = dict(e.model_info)
        if not _priced(e.litellm_params, info):
            info.update(dict.fromkeys(_PRICES, 0.0))
        model_list.append({"model_name": e.model_name, "litellm_params": dict(e.litellm_params), "model_info": info})
    return Router(model_list=model_list, **config.router_options)


def check_router(config: GatewayConfig) -> None:
    """Let litellm's Router judge the config's router settings (it raises TypeError or ValueError), then let the
    Router go: a Router hooks its usage callbacks into litellm's global lists, and one left behind would run
    them after every call of the gateway's own Router (deep copies of the deployment's model info included)."""
    build_router(config).discard()  # type: ignore[no-untyped-call]


HTTP_HANDLER_SWITCH = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"
# what only the OpenAI SDK sends (as the OpenAI-Organization / OpenAI-Project headers); litellm's handler does not
_SDK_ONLY_ENV = ("OPENAI_ORGANIZATION", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")


def select_openai_path(config: GatewayConfig, environ: MutableMapping[str, str] = os.environ) -> bool:
    """Send openai-compatible calls through litellm's own HTTP handler; True when it is selected.

    litellm hands them to the OpenAI SDK by default, whose request transform walks every message against the
    SDK's TypedDict unions in Python: ~0.5 ms of CPU per message, ~300 ms for a 600-turn request. litellm's
    handler sends the same calls (same provider config, Router, retries, fallbacks, error mapping) with the body
    its OpenAI config builds, serialized once. It does not send an OpenAI organization or project, so a config
    or an environment that names one keeps the SDK; an operator who set the switch keeps their choice. The
    switch is process-wide and read by litellm on every call.
    """
    if HTTP_HANDLER_SWITCH in environ:
        return environ[HTTP_HANDLER_SWITCH].strip().lower() in ("1", "true", "yes", "on")
    named = [k for k in _SDK_ONLY_ENV if environ.get(k)]
    named += [f"{e.model_name}: organization" for e in config.model_list if e.litellm_params.get("organization")]
    if named:
        log.info("openai-compatible calls go through the OpenAI SDK (slower on long threads): %s is set", ", ".join(named))
        return False
    environ[HTTP_HANDLER_SWITCH] = "true"
    return True


# told, per call that succeeded, the model asked for, the Router's retries and its fallbacks to other models
AttemptObserver = Callable[[str, int, int], None]


def _attempts(response: Any) -> tuple[int, int]:
    """The retries and fallbacks litellm's Router made for a response (it notes them in the hidden params)."""
    hidden = getattr(response, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    if not isinstance(headers, dict):
        return 0, 0
    counts = [headers.get("x-litellm-attempted-retries"), headers.get("x-litellm-attempted-fallbacks")]
    retries, fallbacks = (c if isinstance(c, int) and c > 0 else 0 for c in counts)
    return retries, fallbacks


def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    dumped: dict[str, Any] = obj.model_dump(exclude_none=True)
    return dumped


class LiteLLMUpstream:
    """`Upstream` over a litellm Router built from the config's model_list."""

    def __init__(self, config: GatewayConfig, router: Router | None = None, on_attempts: AttemptObserver | None = None) -> None:
        self._config = config
        self._router = router if router is not None else build_router(config)
        self._on_attempts = on_attempts
        self._advice = error_advice(config)
        select_openai_path(config)

    def _observe(self, model: str, response: Any) -> None:
        if self._on_attempts is not None:
            self._on_attempts(model, *_attempts(response))

    async def complete(self, model: str, params: Mapping[str, Any]) -> dict[str, Any]:
        try:
            response = await self._router.acompletion(model=model, **_without_stream(params))
        except Exception as exc:
            raise advised(translate_error(exc), self._advice.get(model)) from exc
        self._observe(model, response)
        return _as_dict(response)

    async def stream(self, model: str, params: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            response = await self._router.acompletion(model=model, stream=True, **_without_stream(params))
            self._observe(model, response)
            async for chunk in response:
                yield _as_dict(chunk)
        except GeneratorExit:
            raise
        except Exception as exc:
            raise advised(translate_error(exc), self._advice.get(model)) from exc

    def context_window(self, model: str) -> int | None:
        windows: list[int] = []
        for entry in self._config.entries_for(model):
            info = entry.model_info
            value = info.get("max_input_tokens") or info.get("max_tokens")
            if value is None:
                try:
                    known = litellm.get_model_info(str(entry.litellm_params["model"]))
                    value = known.get("max_input_tokens") or known.get("max_tokens")
                except Exception:  # litellm raises a bare Exception for unmapped models
                    value = None
            if isinstance(value, int) and value > 0:
                windows.append(value)
        return min(windows) if windows else None


def _without_stream(params: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in params.items() if k not in ("stream", "model")}
    if isinstance(kwargs.get("messages"), list):  # litellm may change a message in place; a client's may be read again
        kwargs["messages"] = [dict(m) if type(m) is dict else m for m in kwargs["messages"]]  # (gateway.http.bodies)
    if "user" in kwargs:
        # litellm silently drops `user` for models outside OpenAI's catalog (any
        # openai-compatible server); a client that sends it expects it to arrive.
        kwargs["allowed_openai_params"] = [*kwargs.get("allowed_openai_params", ()), "user"]
    return kwargs
