"""The configuration reference: one line per key of `config.yaml`, rendered from the settings classes.

Owns the one-line meaning of every key. The keys, their types and their defaults are read from the pydantic
classes of `gateway.config`, so the page cannot drift from the code: a key without a line here (or a line for a
key the code no longer has) makes `render_reference` raise, and `tests/test_config_reference.py` fails until
`docs/configuration.md` is rendered again:

    .venv/bin/python -m gateway.config_reference            # rewrite the marked table of docs/configuration.md
    .venv/bin/python -m gateway.config_reference --check    # exit 1 when the page is stale
"""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gateway.config import OWN_SECTIONS, ApiKey, GatewayConfig, ModelEntry

__all__ = ["MEANINGS", "MODEL_INFO_KEYS", "keys", "render_reference", "write_reference"]

MARKERS = ("<!-- config-reference:begin -->", "<!-- config-reference:end -->")
PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

# Keys the gateway reads from a deployment's free-form `model_info` (LiteLLM's own keys pass through untouched).
MODEL_INFO_KEYS: dict[str, tuple[str, str, str]] = {  # key: (type, default, meaning)
    "max_input_tokens": ("int", "litellm's, else unknown", "the model's input window; a request larger than it is refused (400 `context_length_exceeded`)"),
    "max_tokens": ("int", "litellm's, else unknown", "taken as the window when `max_input_tokens` is not given"),
    "pcp_budget_tokens": ("int > 0", "`pcp.budget_tokens`", "this deployment's token budget; a `model_name` served by several takes the smallest"),
    "pcp_enabled": ("bool", "`true`", "`false` serves this model pass-through: nothing paged, nothing stored"),
}

MEANINGS: dict[str, str] = {
    "model_list": "the deployments, exactly in LiteLLM's format; an existing LiteLLM proxy config loads as is",
    "model_list[].model_name": "the name clients ask for; several entries may share one (load balancing)",
    "model_list[].litellm_params": "handed to litellm as is: `model` (provider/model, required), `api_base`, `api_key`, `timeout`, `rpm`, …",
    "model_list[].model_info": "optional facts about the deployment; the keys the gateway reads are listed below",
    "router_settings": "handed to litellm's Router: `num_retries`, `timeout`, `fallbacks`, `disable_cooldowns`, …; an unknown key stops the start",
    "litellm_settings": "as in a LiteLLM proxy config; only the Router's retries and fallbacks are used (`router_settings` wins), the rest is ignored with a log line",
    "server.host": "bind address (`--host` overrides)",
    "server.port": "port (`--port` overrides)",
    "server.max_body_bytes": "larger request bodies get a 413",
    "server.allow_open": "`true`: serve without keys on a non-loopback address (refused otherwise)",
    "store.redis_url": "a Redis or Redis Cluster URL (or set `REDIS_URL`); empty: start the embedded Redis",
    "store.cluster": "`true` when `redis_url` is a Redis Cluster node",
    "store.data_dir": "where the embedded Redis keeps its data (append-only file, unix socket)",
    "store.key_prefix": "every key the gateway writes starts with it",
    "store.responses_ttl_hours": "how long `/v1/responses` keeps a response for `previous_response_id`",
    "store.when_unavailable": "Redis down at request time: serve pass-through, or `error` (503 `store_unavailable`)",
    "pcp.enabled": "`false`: every model is served pass-through",
    "pcp.budget_tokens": "tokens sent upstream per request (tool schemas excluded); `X-PCP-Budget` and `model_info.pcp_budget_tokens` override",
    "pcp.history_floor": "share of the budget the history keeps when the client's own parts leave it less (0: none)",
    "pcp.recent_turns": "most recent exchanges sent verbatim while short (the last one: while in its sitting)",
    "pcp.raw_form": "a thread that fits the budget, and that paging would not make smaller, goes upstream as sent",
    "pcp.max_rounds": "Consult/Shelve rounds before the model must answer without the zoom tools",
    "pcp.zoom_round_tokens": "the least `max_tokens` a round offering Consult/Shelve gets, whatever the client asked (its answer is still cut at the client's limit; 0: the client's)",
    "pcp.trace_limit": "reasoning-trace steps kept per thread",
    "pcp.router_model": "a `model_name` that picks Detail / Summary / leave out per shortlisted page; `null`: the heuristic alone",
    "pcp.router_timeout_ms": "the router model's hard limit; past it the heuristic decides",
    "pcp.shortlist": "pages kept by the broad match and offered excerpts and Detail (more while the budget could show more)",
    "pcp.detail_picks": "no longer used (accepted for old configs): the budget chooses every page's view",
    "pcp.embeddings": "MiniLM similarity in the broad match (`false`: BM25 only, and ~75 MB less per process)",
    "pcp.inline_vectors": "new pages a request embeds before its answer; more (a long history sent at once) are embedded in the background, and that request ranks them by their words",
    "pcp.embedding_int8": "the int8-quantized MiniLM on onnxruntime (`false`: float32, slower)",
    "pcp.embedding_model": "a multilingual sentence-embedding model instead of the shipped MiniLM: an ONNX export or a "
    "sentence-transformers folder (docs/languages.md); a thread another model embedded is re-embedded in the background",
    "pcp.consolidation": "background consolidation jobs (manifests, topics, merging)",
    "pcp.summarizer_model": "a `model_name` that writes manifests and consolidated pages; `null`: extractive summaries",
    "pcp.summarizer_timeout_ms": "the summarizer model's limit per call; past it the extractive fallback is used",
    "pcp.drift_lookahead": "exchanges with content after a page that decide whether a new topic starts there",
    "pcp.drift_margin": "a new topic starts at a page this much closer (cosine) to the exchanges after it than to its topic",
    "pcp.drift_overlap": "... and that, with them, resembles its topic less than this",
    "pcp.adsorb_threshold": "retired and ignored (a config that sets it loads, with a warning)",
    "pcp.short_anchor_tokens": "deprecated and ignored (a config that sets it loads, with a warning)",
    "pcp.max_processing_tokens": "a topic longer than this is relayed into a new container, its running summary at the head",
    "pcp.container_tokens": "split a topic's containers at this size (`null`: only the relay splits)",
    "pcp.idle_flush_minutes": "a topic quiet this long is flushed; the sitting of the last exchange ends",
    "pcp.merge_interval_hours": "how often adjacent same-topic containers are merged",
    "pcp.merge_staleness_hours": "containers unused this long may be merged into a higher one",
    "pcp.profiles": "built-in client profiles (aider, opencode) by name, each on unless set to false",
    "pcp.pin": "regular expressions on a block's user text, added to the profiles': the client's scaffolding (besides the layout's), kept verbatim, never paged",
    "pcp.pin_preamble": "added to the profiles': the first block matching one, and the plain exchanges before it, are scaffolding too",
    "pcp.side_request": "regular expressions on a request's first system message, added to the profiles': a client's side request, sent as it is, storing nothing",
    "jobs.workers": "consolidation workers inside `serve` (0: only `pcp-gateway worker` processes)",
    "jobs.visibility_timeout_ms": "a silent worker's job is claimed by another after this",
    "jobs.max_attempts": "then the job goes to the dead-letter stream with its error",
    "jobs.backoff_ms": "first retry delay; doubles each attempt",
    "jobs.shutdown_grace_ms": "on SIGTERM, workers finish the job in hand this long; a job cut short is claimed by another worker",
    "general_settings.master_key": "LiteLLM's master key: every model, `/metrics`, any tenant by `X-PCP-Tenant`; other `general_settings` are ignored",
    "keys": "client keys, each with its own tenant (key space); with none and no master key the gateway is open",
    "keys[].key": "the key a client presents (`Authorization: Bearer` or `x-api-key`); may be `os.environ/NAME`",
    "keys[].tenant": "the tenant whose pages it reaches (1–64 of `A-Z a-z 0-9 . _ -`); several keys may share one",
    "keys[].models": "the `model_name`s it may call (default: all)",
    "keys[].rpm": "requests per minute, counted in Redis and shared by every gateway process (default: no limit)",
}

_LIST_ITEMS: dict[str, type[BaseModel]] = {"model_list": ModelEntry, "keys": ApiKey}


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        parts = [_type_name(a) for a in get_args(annotation) if a is not type(None)]
        return " \\| ".join(parts) + " or null"
    if origin is tuple:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(field: FieldInfo) -> str:
    """The field's constraints (pydantic keeps them as annotated-types objects: Ge, Gt, Le, MinLen)."""
    marks = []
    for item in field.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤")):
            if getattr(item, attribute, None) is not None:
                marks.append(f"{sign} {getattr(item, attribute)}")
        if getattr(item, "min_length", 0):
            marks.append(f"at least {item.min_length}")
    return f" ({', '.join(marks)})" if marks else ""


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (tuple, list)):
        return "`[]`" if not value else f"`{list(value)}`"
    if isinstance(value, dict):
        return "`{}`"
    if isinstance(value, Path):
        return f"`./{value}`" if not value.is_absolute() else f"`{value}`"
    return f"`{value}`"


def keys(root: type[GatewayConfig] = GatewayConfig) -> Iterator[tuple[str, str, str]]:
    """Every key of the file, in the order the settings classes declare them: (dotted key, type, default)."""
    for name, field in root.model_fields.items():
        if name not in OWN_SECTIONS:
            continue  # set by load_config (`source`), not written in a file
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for sub, inner in annotation.model_fields.items():
                yield f"{name}.{sub}", _type_name(inner.annotation) + _bounds(inner), _default(inner)
            continue
        yield name, _type_name(annotation) + _bounds(field), _default(field)
        if name in _LIST_ITEMS:
            for sub, inner in _LIST_ITEMS[name].model_fields.items():
                yield f"{name}[].{sub}", _type_name(inner.annotation) + _bounds(inner), _default(inner)


def render_reference(root: type[GatewayConfig] = GatewayConfig) -> str:
    """The Markdown tables of every key; raises ValueError naming a key without its line, or a line without a key."""
    rows = list(keys(root))
    found = {key for key, _, _ in rows}
    problems = [f"no line for {key}" for key in sorted(found - MEANINGS.keys())]
    problems += [f"a line for {key}, which gateway.config does not have" for key in sorted(MEANINGS.keys() - found)]
    if problems:
        raise ValueError(f"gateway.config_reference.MEANINGS is out of step with gateway.config: {'; '.join(problems)}")
    out: list[str] = []
    section = None
    for key, kind, default in rows:
        head = key.split(".")[0].split("[")[0]
        if head != section:
            section = head
            out += ["", f"### `{head}`", "", "| key | type | default | what it does |", "|---|---|---|---|"]
        out.append(f"| `{key}` | {kind} | {default} | {MEANINGS[key]} |")
        if key == "model_list[].model_info":
            for info, (kind_, default_, meaning) in MODEL_INFO_KEYS.items():
                out.append(f"| `model_list[].model_info.{info}` | {kind_} | {default_} | {meaning} |")
    return "\n".join(out).strip()


def write_reference(text: str) -> str:
    """``text`` (the page) with its marked table replaced by the current rendering; raises when a marker is missing."""
    begin, end = MARKERS
    if begin not in text or end not in text:
        raise ValueError(f"the page lacks the markers {begin} … {end}")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{render_reference()}\n{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the configuration reference into docs/configuration.md.")
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is not what the code renders")
    args = parser.parse_args(argv)
    text = args.page.read_text(encoding="utf-8")
    new = write_reference(text)
    if args.check:
        if new != text:
            print(f"{args.page} is stale: run .venv/bin/python -m gateway.config_reference", file=sys.stderr)
            return 1
        return 0
    args.page.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
