"""The configuration file: LiteLLM's `model_list` plus the gateway's own sections.

`model_list` and `router_settings` are taken exactly as LiteLLM writes them, so an
existing LiteLLM proxy config loads unchanged; other LiteLLM sections are accepted and
ignored with a log line. The gateway's own sections (`server`, `store`, `pcp`) are
validated strictly: a typo fails at start with a message naming the key.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gateway.core.profiles import PROFILES, ClientMarkers, client_markers
from gateway.errors import ConfigError

__all__ = [
    "GatewayConfig",
    "ModelEntry",
    "ServerSettings",
    "StoreSettings",
    "PcpSettings",
    "JobSettings",
    "ApiKey",
    "GeneralSettings",
    "load_config",
    "parse_config",
]

log = logging.getLogger("gateway.config")

ENV_PREFIX = "os.environ/"
OWN_SECTIONS = ("model_list", "router_settings", "litellm_settings", "server", "store", "pcp", "jobs", "general_settings", "keys")
# the `litellm_settings` keys the LiteLLM proxy hands its Router (retries, fallbacks, cooldowns), by Router argument
ROUTER_FROM_LITELLM = {
    "num_retries": "num_retries",
    "request_timeout": "timeout",
    "fallbacks": "fallbacks",
    "default_fallbacks": "default_fallbacks",
    "context_window_fallbacks": "context_window_fallbacks",
    "content_policy_fallbacks": "content_policy_fallbacks",
    "max_fallbacks": "max_fallbacks",
    "allowed_fails": "allowed_fails",
    "cooldown_time": "cooldown_time",
    "retry_after": "retry_after",
}
TENANT_NAME = re.compile(r"[A-Za-z0-9._\-]{1,64}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelEntry(BaseModel):
    """One deployment, in LiteLLM's format. `litellm_params` goes to litellm as is."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model_name: str = Field(min_length=1)
    litellm_params: dict[str, Any]
    model_info: dict[str, Any] = Field(default_factory=dict)

    @field_validator("litellm_params")
    @classmethod
    def _needs_model(cls, value: dict[str, Any]) -> dict[str, Any]:
        model = value.get("model")
        if not isinstance(model, str) or not model:
            raise ValueError("litellm_params.model is required (e.g. openai/gpt-4o-mini)")
        return value

    @field_validator("model_info")
    @classmethod
    def _pcp_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        budget = value.get("pcp_budget_tokens")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
            raise ValueError(f"model_info.pcp_budget_tokens must be a positive whole number of tokens; got {budget!r}")
        return value

    @property
    def budget(self) -> int | None:
        """This deployment's own `model_info.pcp_budget_tokens`, if it has one."""
        value = self.model_info.get("pcp_budget_tokens")
        return value if isinstance(value, int) else None


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=4000, ge=0, le=65535)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    allow_open: bool = False  # serve on a non-loopback address without keys (gateway.http.auth)


class StoreSettings(_Strict):
    redis_url: str | None = None
    cluster: bool = False
    data_dir: Path = Path("./data")
    key_prefix: str = Field(default="pcp", min_length=1)
    responses_ttl_hours: float = Field(default=720.0, gt=0)  # how long /v1/responses keeps a response for previous_response_id
    # Redis down while a paged request is prepared: serve it pass-through (with a warning), or answer 503
    when_unavailable: Literal["pass-through", "error"] = "pass-through"


class PcpSettings(_Strict):
    enabled: bool = True
    budget_tokens: int = Field(default=4000, gt=0)
    # the share of the budget a request's history keeps when the client's own parts leave it less (gateway.service.context)
    history_floor: float = Field(default=0.25, ge=0.0, le=1.0)
    recent_turns: int = Field(default=2, ge=0)
    raw_form: bool = True  # a thread that fits the budget and paging would not shrink goes upstream as sent
    max_rounds: int = Field(default=4, ge=1)
    zoom_round_tokens: int = Field(default=256, ge=0)
    trace_limit: int = Field(default=20, ge=0)
    router_model: str | None = None
    router_timeout_ms: int = Field(default=1500, gt=0)
    shortlist: int = Field(default=24, ge=1)
    detail_picks: int = Field(default=8, ge=0)
    embeddings: bool = True
    embedding_int8: bool = True
    # new pages a request embeds before its answer; a request that brings more (a long history sent at once, as when
    # a client first points at the gateway) leaves theirs to the thread's background job, as a thread sent raw does
    inline_vectors: int = Field(default=64, ge=0)
    # a multilingual sentence-embedding model instead of the shipped all-MiniLM-L6-v2: an ONNX export or a
    # sentence-transformers folder (gateway.adapters.embedding_models; docs/languages.md)
    embedding_model: Path | None = None
    consolidation: bool = True
    summarizer_model: str | None = None
    summarizer_timeout_ms: int = Field(default=60_000, gt=0)
    # where a topic ends: an exchange that is drift_margin closer to the drift_lookahead exchanges after it than
    # to its topic, and that with them resembles the topic less than drift_overlap (the reason is in core.segmentation)
    drift_margin: float = Field(default=0.15, ge=-2.0, le=2.0)
    drift_overlap: float = Field(default=0.25, ge=-1.0, le=1.0)
    drift_lookahead: int = Field(default=3, ge=1)
    # retired and ignored, still accepted so that configs written for earlier versions load (with a warning):
    # content-free user messages ("ok", "continue") stay in their topic whatever their length; topics are no
    # longer cut at a fixed cosine to a topic kernel (drift_* above)
    short_anchor_tokens: int | None = Field(default=None, ge=0)
    adsorb_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    max_processing_tokens: int = Field(default=8000, gt=0)
    container_tokens: int | None = Field(default=None, gt=0)
    idle_flush_minutes: float = Field(default=30.0, gt=0)
    merge_interval_hours: float = Field(default=12.0, gt=0)
    merge_staleness_hours: float = Field(default=72.0, ge=0)
    # the built-in client profiles (gateway.core.profiles), each on unless set to false here
    profiles: dict[str, bool] = Field(default_factory=dict)
    # markers added to the profiles': regular expressions on a block's user text marking the client's scaffolding
    # (gateway.core.scaffolding), and on a request's first system message marking a client's side request
    pin: tuple[str, ...] = ()
    pin_preamble: tuple[str, ...] = ()
    side_request: tuple[str, ...] = ()

    @field_validator("pin", "pin_preamble", "side_request")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return value

    @field_validator("profiles")
    @classmethod
    def _profiles_known(cls, value: dict[str, bool]) -> dict[str, bool]:
        known = [p.name for p in PROFILES]
        unknown = sorted(name for name in value if name not in known)
        if unknown:
            raise ValueError(f"unknown client profile(s) {', '.join(unknown)}; the built-in ones are {', '.join(known)}")
        return value

    def client_markers(self) -> ClientMarkers:
        """The client markers in force: the profiles not turned off, and this config's own markers."""
        off = [name for name, on in self.profiles.items() if not on]
        return client_markers(off, self.pin, self.pin_preamble, self.side_request)


class JobSettings(_Strict):
    workers: int = Field(default=1, ge=0)  # in-process workers of `serve`; `pcp-gateway worker` runs more
    visibility_timeout_ms: int = Field(default=30_000, gt=0)
    max_attempts: int = Field(default=5, ge=1)
    backoff_ms: int = Field(default=500, ge=0)
    # a stopping process (SIGTERM) lets its workers finish the job in hand this long, then leaves it to be claimed
    shutdown_grace_ms: int = Field(default=10_000, ge=0)


class GeneralSettings(BaseModel):
    """LiteLLM's `general_settings`: the gateway reads `master_key` and ignores the rest."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    master_key: str | None = Field(default=None, min_length=1)


class ApiKey(_Strict):
    """One client key: the tenant whose pages it reaches, the models it may call, its requests per minute."""

    key: str = Field(min_length=1)
    tenant: str
    models: tuple[str, ...] | None = None
    rpm: int | None = Field(default=None, gt=0)

    @field_validator("tenant")
    @classmethod
    def _tenant_is_a_name(cls, value: str) -> str:
        if not TENANT_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a tenant name (1-64 of A-Z a-z 0-9 . _ -)")
        return value


class GatewayConfig(_Strict):
    model_list: tuple[ModelEntry, ...] = Field(min_length=1)
    router_settings: dict[str, Any] = Field(default_factory=dict)
    litellm_settings: dict[str, Any] = Field(default_factory=dict)  # only the ROUTER_FROM_LITELLM keys
    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    pcp: PcpSettings = PcpSettings()
    jobs: JobSettings = JobSettings()
    general_settings: GeneralSettings = GeneralSettings()
    keys: tuple[ApiKey, ...] = ()
    source: Path | None = None

    @model_validator(mode="after")
    def _pcp_models_are_listed(self) -> GatewayConfig:
        for key in ("router_model", "summarizer_model"):
            name = getattr(self.pcp, key)
            if name is not None and name not in self.model_names:
                raise ValueError(f"pcp.{key} {name!r} is not a model_name in model_list")
        presented = [entry.key for entry in self.keys] + [k for k in (self.general_settings.master_key,) if k]
        if len(set(presented)) != len(presented):
            raise ValueError("keys: the same key is listed twice (or is also the master key); each key must be unique")
        for entry in self.keys:
            unknown = [m for m in entry.models or () if m not in self.model_names]
            if unknown:
                raise ValueError(f"keys: tenant {entry.tenant!r} lists models not in model_list: {', '.join(unknown)}")
        return self

    @property
    def auth_enabled(self) -> bool:
        """Whether clients must present a key (a master key or a `keys` entry is configured)."""
        return bool(self.general_settings.master_key or self.keys)

    @property
    def router_options(self) -> dict[str, Any]:
        """The litellm Router's arguments: `litellm_settings`' retries and fallbacks, `router_settings` winning."""
        taken = {ROUTER_FROM_LITELLM[k]: v for k, v in self.litellm_settings.items() if k in ROUTER_FROM_LITELLM}
        return {**taken, **self.router_settings}

    @property
    def model_names(self) -> tuple[str, ...]:
        """Distinct `model_name`s in config order (several deployments may share one)."""
        return tuple(dict.fromkeys(entry.model_name for entry in self.model_list))

    def entries_for(self, model_name: str) -> tuple[ModelEntry, ...]:
        return tuple(e for e in self.model_list if e.model_name == model_name)

    def budget_for(self, model_name: str) -> int:
        """The token budget of a request to ``model_name`` without `X-PCP-Budget`: its deployments'
        `model_info.pcp_budget_tokens` (each without one counts as `pcp.budget_tokens`), the smallest, since
        the router may send the request to any of them; `pcp.budget_tokens` for a name not in the list."""
        budgets = [e.budget or self.pcp.budget_tokens for e in self.entries_for(model_name)]
        return min(budgets, default=self.pcp.budget_tokens)


def _resolve_env(value: Any, where: str, environ: Mapping[str, str]) -> Any:
    """Replace `os.environ/NAME` strings, as LiteLLM does; a missing variable is None."""
    if isinstance(value, str) and value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :]
        if name not in environ:
            log.warning("%s refers to environment variable %s, which is not set", where, name)
            return None
        return environ[name]
    if isinstance(value, dict):
        return {k: _resolve_env(v, f"{where}.{k}", environ) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_env(v, f"{where}[{i}]", environ) for i, v in enumerate(value)]
    return value


def _master_key(value: Any, where: str, environ: Mapping[str, str]) -> Any:
    """`general_settings.master_key`; from an unset variable, no master key (the shipped config's case)."""
    if isinstance(value, str) and value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :]
        if name not in environ or not environ[name]:
            log.info("%s: general_settings.master_key: %s is not set, so there is no master key", where, name)
            return None
        return environ[name]
    return value


def _resolved_key(entry: Any, index: int, where: str, environ: Mapping[str, str]) -> Any:
    """A `keys` entry with `os.environ/NAME` resolved; an unset variable is an error (a tenant locked out)."""
    if not isinstance(entry, dict):
        return entry
    key = entry.get("key")
    if isinstance(key, str) and key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX) :] not in environ:
        raise ConfigError(f"{where}: keys[{index}].key: environment variable {key[len(ENV_PREFIX):]} is not set")
    return _resolve_env(entry, f"keys[{index}]", environ)


def _key_path(loc: tuple[int | str, ...], raw: Mapping[str, Any]) -> str:
    """Render a pydantic error location as the key path a user sees in the YAML."""
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(item, int):
            name = node[item].get("model_name") if isinstance(node, list) and item < len(node) and isinstance(node[item], dict) else None
            parts.append(f"[{item}]" + (f" ({name})" if name else ""))
            node = node[item] if isinstance(node, list) and item < len(node) else None
        else:
            parts.append(("." if parts else "") + item)
            node = node.get(item) if isinstance(node, dict) else None
    return "".join(parts)


def parse_config(
    raw: Any, *, source: Path | None = None, environ: Mapping[str, str] = os.environ
) -> GatewayConfig:
    """Validate a parsed YAML document; raise ConfigError naming the bad key."""
    where = str(source) if source else "config"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level must be a mapping with a model_list")
    for key in raw:
        if key not in OWN_SECTIONS:
            log.info("%s: section %r is not used by the gateway; ignored", where, key)
    own = {k: v for k, v in raw.items() if k in OWN_SECTIONS}
    if "model_list" in own and isinstance(own["model_list"], list):
        own["model_list"] = [
            _resolve_env(entry, f"model_list[{i}]", environ) if isinstance(entry, dict) else entry
            for i, entry in enumerate(own["model_list"])
        ]
    if "router_settings" in own and own["router_settings"] is None:
        own["router_settings"] = {}
    if isinstance(own.get("litellm_settings"), dict):
        settings = own["litellm_settings"]
        ignored = sorted(str(k) for k in settings if k not in ROUTER_FROM_LITELLM)
        if ignored:
            log.info("%s: litellm_settings: only retries and fallbacks are used by the gateway; ignored: %s", where, ", ".join(ignored))
        own["litellm_settings"] = {k: v for k, v in settings.items() if k in ROUTER_FROM_LITELLM}
    elif own.get("litellm_settings") is None:
        own.pop("litellm_settings", None)
    if isinstance(own.get("general_settings"), dict):
        general = own["general_settings"]
        ignored = sorted(k for k in general if k != "master_key")
        if ignored:
            log.info("%s: general_settings: only master_key is used by the gateway; ignored: %s", where, ", ".join(ignored))
        own["general_settings"] = {"master_key": _master_key(general.get("master_key"), where, environ)}
    elif own.get("general_settings") is None:
        own.pop("general_settings", None)
    if own.get("keys") is None:
        own.pop("keys", None)
    elif isinstance(own["keys"], list):
        own["keys"] = [_resolved_key(entry, i, where, environ) for i, entry in enumerate(own["keys"])]
    try:
        config = GatewayConfig.model_validate({**own, "source": source})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _key_path(tuple(first["loc"]), own) or "(top level)"
        raise ConfigError(f"{where}: {key}: {first['msg']}") from exc
    if config.pcp.short_anchor_tokens is not None:
        log.warning("%s: pcp.short_anchor_tokens is deprecated and ignored; remove it", where)
    if config.pcp.adsorb_threshold is not None:
        log.warning(
            "%s: pcp.adsorb_threshold is retired and ignored (topics are cut by pcp.drift_margin, drift_overlap and "
            "drift_lookahead); remove it", where,
        )
    return config


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] = os.environ) -> GatewayConfig:
    """Read and validate a config file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from exc
    return parse_config(raw, source=file, environ=environ)
