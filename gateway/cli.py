"""The command line: `pcp-gateway serve`, `worker`, `check-config`, `import` and `export`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from starlette.datastructures import Headers

from gateway.adapters.embedding_models import user_model
from gateway.adapters.store_keys import ThreadKey
from gateway.adapters.upstream import check_router, start_advice
from gateway.bootstrap import build_app, run_worker
from gateway.config import GatewayConfig, load_config
from gateway.errors import ConfigError, GatewayError
from gateway.http.auth import Access, exposure_problem, open_warning
from gateway.logs import LOG_FORMATS, configure_logging
from gateway.transfer import run_export, run_import
from gateway.service.chat_files import ChatFileError, read_conversations
from gateway.service.identity import thread_of

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pcp-gateway", description="OpenAI-compatible gateway with paged memory.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", default="config.yaml", help="config file (default: ./config.yaml)")
    serve.add_argument("--host", default=None, help="bind address (default: server.host, else 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: server.port, else 4000)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--log-format", default="text", choices=LOG_FORMATS, help="text lines, or one JSON object per line")
    worker = commands.add_parser("worker", help="run consolidation workers (in addition to the gateway's own)")
    worker.add_argument("--config", default="config.yaml", help="config file (default: ./config.yaml)")
    worker.add_argument("--workers", type=int, default=1, help="workers in this process (default: 1)")
    worker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    worker.add_argument("--log-format", default="text", choices=LOG_FORMATS, help="text lines, or one JSON object per line")
    check = commands.add_parser("check-config", help="validate a config file and print what it defines")
    check.add_argument("--config", default="config.yaml", help="config file (default: ./config.yaml)")
    load = commands.add_parser("import", help="store conversations (OpenAI chat JSONL, ChatGPT conversations.json) as memory")
    load.add_argument("file", type=Path)
    load.add_argument("--thread", help="thread to store the file's one conversation in (default: its own, else a fingerprint)")
    load.add_argument("--wait", action="store_true", help="run consolidation here until the imported threads are done")
    dump = commands.add_parser("export", help="write a thread's messages as one JSONL line")
    dump.add_argument("thread")
    dump.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    for sub in (load, dump):
        sub.add_argument("--config", default="config.yaml", help="config file (default: ./config.yaml)")
        owner = sub.add_mutually_exclusive_group()
        owner.add_argument("--api-key", help="the client API key whose tenant owns the threads (default: none, tenant anon)")
        owner.add_argument("--tenant", help="the tenant id itself (as in the store), instead of --api-key")
        sub.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def _transfer(config: GatewayConfig, args: argparse.Namespace) -> int:
    try:  # the tenant the gateway would give this key: its configured tenant, or the open gateway's own
        tenant = args.tenant or Access(config).identify(Headers({"authorization": f"Bearer {args.api_key}"} if args.api_key else {})).tenant
    except GatewayError as exc:
        print(f"pcp-gateway: {exc.message}", file=sys.stderr)
        return 2
    if args.command == "export":
        return run_export(config, ThreadKey(tenant, thread_of(args.thread, None, tenant, [])), args.output)
    try:
        conversations = read_conversations(args.file)
    except ChatFileError as exc:
        print(f"pcp-gateway: cannot import {args.file}: {exc}", file=sys.stderr)
        return 2
    if args.thread and len(conversations) > 1:
        print(f"pcp-gateway: --thread needs a file with one conversation; {args.file} has {len(conversations)}", file=sys.stderr)
        return 2
    return run_import(config, conversations, tenant, args.thread, args.wait)


def _serve(config: GatewayConfig, host: str, port: int, log_level: str) -> None:
    app = build_app(config)
    # uvicorn's own loggers go through the root handler (text or JSON); the gateway logs each request itself
    uvicorn.run(app, host=host, port=port, log_level=log_level, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=10)


def _worker(config: GatewayConfig, workers: int) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(config, stop, workers)

    asyncio.run(main())


def _check(config: GatewayConfig) -> None:
    print(f"{config.source}: ok")
    for name in config.model_names:
        targets = ", ".join(str(e.litellm_params["model"]) for e in config.entries_for(name))
        own = config.budget_for(name)
        print(f"  model {name} -> {targets}" + (f" (budget {own} tokens)" if own != config.pcp.budget_tokens else ""))
    store = config.store.redis_url or "embedded redis in " + str(config.store.data_dir)
    print(f"  store: {store}")
    print(f"  pcp: {'enabled' if config.pcp.enabled else 'disabled'}, budget {config.pcp.budget_tokens} tokens")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(getattr(args, "log_level", "info"), getattr(args, "log_format", "text"))
    try:
        config = load_config(args.config)
        if config.pcp.embedding_model is not None:
            user_model(config.pcp.embedding_model)  # a path that holds no model fails here, not at start-up
    except ConfigError as exc:
        print(f"pcp-gateway: bad config: {exc}", file=sys.stderr)
        return 2
    try:
        check_router(config)  # router_settings are LiteLLM's; let its Router judge them
    except (TypeError, ValueError) as exc:
        print(f"pcp-gateway: bad config: {config.source}: router_settings: {exc}", file=sys.stderr)
        return 2
    if args.command == "check-config":
        _check(config)
        return 0
    if args.command in ("import", "export"):
        return _transfer(config, args)
    if args.command == "worker":
        _worker(config, max(args.workers, 1))
        return 0
    host = args.host or config.server.host
    port = args.port if args.port is not None else config.server.port
    problem = exposure_problem(config, host)
    if problem is not None:
        print(f"pcp-gateway: {problem}", file=sys.stderr)
        return 2
    if (warning := open_warning(config, host, port)) is not None:
        logging.getLogger("gateway").warning(warning)
    for line in start_advice(config):  # no key, no local model: what to do, before the first request fails
        logging.getLogger("gateway").warning(line)
    _serve(config, host, port, args.log_level)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
